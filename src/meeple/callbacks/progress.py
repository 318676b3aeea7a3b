"""Rich progress bar with short, stable names for the live metrics."""

from __future__ import annotations

from lightning.pytorch.callbacks import RichProgressBar

from meeple.tracking.keys import EVAL_RETURN, TRAIN_RETURN

# Logged key -> name shown in the bar (everything else stays in the logger only).
SHOWN = {
    TRAIN_RETURN: "return",
    EVAL_RETURN: "eval_return",
    "val/accuracy": "val_acc",  # behavioral cloning (meeple.phases.bc)
}


class MeepleProgressBar(RichProgressBar):
    stage_label: str | None = None  # "2/3 ppo": which stage of how many is running

    def _get_train_description(self, current_epoch: int) -> str:
        description = super()._get_train_description(current_epoch)
        return f"[{self.stage_label}] {description}" if self.stage_label else description

    def get_metrics(self, trainer, pl_module):
        metrics = {SHOWN[k]: v for k, v in super().get_metrics(trainer, pl_module).items() if k in SHOWN}
        # Per-minibatch values the module keeps without calling self.log (see modules/base.py).
        for key, value in getattr(pl_module, "live", {}).items():
            metrics[key] = f"{float(value):.3f}"
        return metrics
