"""Progress display: a rich bar on a terminal, short plain lines in a log file.

A rich bar written to a file or a pipe cannot redraw in place: every epoch leaves its final
frame behind, wrapped to 2-4 lines at 80 columns. :func:`progress_bar` (the configs'
``_target_``) picks :class:`PlainProgress` there instead: one line of at most 80 characters
per epoch, at most one every ``min_interval_s`` seconds, and always the last. An epoch that
runs for minutes (behavioral cloning over a corpus) also gets a line within it every
``batch_interval_s`` seconds, so a log never sits silent for a whole epoch.
"""

from __future__ import annotations

import time
from typing import Any

from lightning.pytorch.callbacks import ProgressBar, RichProgressBar

from meeple.logs import is_terminal
from meeple.tracking.keys import EVAL_RETURN, TRAIN_RETURN

# Logged key -> name shown in the bar (everything else stays in the logger only).
SHOWN = {
    TRAIN_RETURN: "return",
    EVAL_RETURN: "eval_return",
    "val/accuracy": "val_acc",  # behavioral cloning (meeple.phases.bc)
}
LINE_WIDTH = 80


def shown_metrics(metrics: dict[str, Any], pl_module: Any) -> dict[str, Any]:
    """The bar's metrics under their short names, plus the per-minibatch values the module keeps
    without calling self.log (see phases/base.py)."""
    shown = {SHOWN[k]: v for k, v in metrics.items() if k in SHOWN}
    for key, value in getattr(pl_module, "live", {}).items():
        shown[key] = f"{float(value):.3f}"
    return shown


class StageLabel:
    """A progress display that shows which stage of a pipeline is running (the stage sets it)."""

    stage_label: str | None = None  # "2/3 ppo": which stage of how many is running


class MeepleProgressBar(StageLabel, RichProgressBar):

    def _get_train_description(self, current_epoch: int) -> str:
        description = super()._get_train_description(current_epoch)
        return f"[{self.stage_label}] {description}" if self.stage_label else description

    def get_metrics(self, trainer, pl_module):
        return shown_metrics(super().get_metrics(trainer, pl_module), pl_module)


class PlainProgress(StageLabel, ProgressBar):
    """``epoch 3/10 step 120 12s return=21.3 eval_return=20 loss=0.213``, one line per epoch
    (no carriage returns, no escapes), cut at 80 characters; within a long epoch,
    ``epoch 1/6 batch 340/2413 step 340 95s ...``."""

    def __init__(self, min_interval_s: float = 10.0, batch_interval_s: float = 60.0) -> None:
        super().__init__()
        self.min_interval_s, self.batch_interval_s = min_interval_s, batch_interval_s
        self._enabled = True
        self._start = self._last = 0.0

    def disable(self) -> None:
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    def get_metrics(self, trainer, pl_module):
        return shown_metrics(super().get_metrics(trainer, pl_module), pl_module)

    def on_train_start(self, trainer, pl_module) -> None:
        self._start = time.monotonic()
        self._last = float("-inf")

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        now = time.monotonic()
        epoch = trainer.current_epoch + 1
        last = trainer.max_epochs is not None and epoch >= trainer.max_epochs
        if not self._enabled or (now - self._last < self.min_interval_s and not last):
            return
        self._last = now
        self.print(self.line(trainer, pl_module, now - self._start))

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        now = time.monotonic()
        if not self._enabled or now - self._last < self.batch_interval_s:
            return
        self._last = now
        batches = self.total_train_batches  # an int, or inf for an iterable of unknown length
        where = f"batch {batch_idx + 1}" + (f"/{int(batches)}" if batches != float("inf") else "")
        self.print(self.line(trainer, pl_module, now - self._start, where=where))

    def line(self, trainer, pl_module, elapsed_s: float, where: str | None = None) -> str:
        total = f"/{trainer.max_epochs}" if trainer.max_epochs not in (None, -1) else ""
        stage = [f"[{self.stage_label}]"] if self.stage_label else []
        parts = [*stage, f"epoch {trainer.current_epoch + 1}{total}", *([where] if where else []),
                 f"step {trainer.global_step}", f"{elapsed_s:.0f}s"]
        for key, value in self.get_metrics(trainer, pl_module).items():
            parts.append(f"{key}={_short(value)}")
        text = " ".join(parts)
        return text if len(text) <= LINE_WIDTH else text[: LINE_WIDTH - 3] + "..."

    def print(self, *args: Any, **kwargs: Any) -> None:
        print(*args, flush=True, **kwargs)


def _short(value: Any) -> str:
    try:
        return f"{float(value):.4g}"
    except (TypeError, ValueError):
        return str(value)


def progress_bar(leave: bool = False, min_interval_s: float = 10.0, batch_interval_s: float = 60.0,
                 **rich_kwargs: Any) -> ProgressBar:
    """The rich bar when stdout is a terminal, :class:`PlainProgress` when it is a file or a pipe."""
    if is_terminal():
        return MeepleProgressBar(leave=leave, **rich_kwargs)
    return PlainProgress(min_interval_s=min_interval_s, batch_interval_s=batch_interval_s)
