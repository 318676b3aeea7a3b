"""Console output that reads cleanly in a log file (``python train.py > log.txt 2>&1``).

Libraries write for a terminal: TorchRL colours its log lines with ANSI escapes whatever the
stream, and Lightning advertises its cloud logger on every run. :func:`quiet_library_output`
fixes both; it runs before every job through the Hydra callback :class:`CleanOutput`
(``conf/hydra/default.yaml``), so ``train.py`` needs no change. The progress bar's plain mode
lives in :mod:`meeple.callbacks.progress`, Warp's start-up noise in :mod:`meeple.envs.warp_init`.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from hydra.experimental.callback import Callback

PLAIN_FORMAT = "%(asctime)s [%(name)s][%(levelname)s] %(message)s"


def is_terminal(stream: Any = None) -> bool:
    """True when ``stream`` (default stdout) is an interactive terminal, not a file or a pipe."""
    stream = sys.stdout if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class _DropLitLoggerTip(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "litlogger" not in str(record.msg)


_TIP_FILTER = _DropLitLoggerTip()


def quiet_library_output() -> None:
    """Drop Lightning's litlogger tip; give TorchRL's handlers a plain format when their stream
    is not a terminal. Idempotent."""
    # rank_zero_info logs through this logger (lightning_utilities' rank_zero module).
    for name in ("lightning_utilities.core.rank_zero", "lightning.pytorch.utilities.rank_zero",
                 "lightning.fabric.utilities.rank_zero"):
        logger = logging.getLogger(name)
        if _TIP_FILTER not in logger.filters:
            logger.addFilter(_TIP_FILTER)
    if "torchrl" not in sys.modules:
        return  # torchrl sets its coloured handler when imported: the stage calls this again then
    for handler in logging.getLogger("torchrl").handlers:
        stream = getattr(handler, "stream", None)
        if stream is not None and not is_terminal(stream):
            handler.setFormatter(logging.Formatter(PLAIN_FORMAT))


class CleanOutput(Callback):
    """Hydra callback: :func:`quiet_library_output` before a run, a sweep and each job."""

    def on_run_start(self, config: Any, **kwargs: Any) -> None:
        quiet_library_output()

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        quiet_library_output()

    def on_job_start(self, config: Any, **kwargs: Any) -> None:
        quiet_library_output()
