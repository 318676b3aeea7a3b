"""Replays as run artifacts: pages in the run directory (``replays/phase<N>/``) and, when the run
is tracked, the same files as MLflow artifacts under the same path.

:func:`save_replays` is plain file writing; :func:`publish_replays` is what an evaluation callback
calls at the end of an evaluation with the games it kept. A replay must never fail a run, so
publishing logs a warning instead of raising.
"""

from __future__ import annotations

import logging
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from meeple.viewer.page import write_replay
from meeple.viewer.replay import Replay

log = logging.getLogger(__name__)
FOLDER = "replays"


def slug(text: str, limit: int = 60) -> str:
    """A file-name part of ``text``: lower-case letters, digits and single hyphens."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:limit].rstrip("-") or "replay"


def save_replays(replays: Sequence[Replay], directory: str | Path) -> list[Path]:
    """Writes each replay as ``<directory>/<index>-<slug of its title>.html``; returns the paths."""
    directory = Path(directory)
    return [write_replay(directory / f"{i}-{slug(r.title)}.html", r) for i, r in enumerate(replays)]


def run_replay_dir(trainer: Any) -> tuple[Path | None, str]:
    """(``<run dir>/replays/phase<N>`` or None when the run has no run directory, the artifact
    path ``replays/phase<N>``), from the run's checkpoint callback (it knows the run and stage)."""
    from meeple.checkpoint.callback import RolloutCheckpoint

    ckpt = next((c for c in trainer.callbacks if isinstance(c, RolloutCheckpoint)), None)
    if ckpt is None:
        return None, FOLDER
    sub = f"{FOLDER}/{ckpt.run.phase_dir(ckpt.phase).name}"
    return ckpt.run.path / sub, sub


def publish_replays(trainer: Any, replays: Sequence[Replay]) -> list[Path]:
    """Saves ``replays`` in the run directory and logs them to the run's MLflow run, if any
    (rank 0 only). Returns the files written in the run directory (none without one)."""
    if not replays or trainer.global_rank != 0:
        return []
    from lightning.pytorch.loggers import MLFlowLogger

    try:
        folder, artifact_path = run_replay_dir(trainer)
        loggers = [lg for lg in trainer.loggers if isinstance(lg, MLFlowLogger) and lg.run_id is not None]
        with tempfile.TemporaryDirectory() as tmp:
            paths = save_replays(replays, folder if folder is not None else tmp)
            for logger in loggers:
                for path in paths:
                    logger.experiment.log_artifact(logger.run_id, str(path), artifact_path)
        return paths if folder is not None else []
    except Exception as err:  # a page is a view of the run: it must never fail it
        log.warning("replays not saved: %s", err)
        return []
