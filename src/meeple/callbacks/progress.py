"""Rich progress bar with short, stable names for the live metrics."""

from __future__ import annotations

from lightning.pytorch.callbacks import RichProgressBar

# Logged key -> name shown in the bar (everything else stays in the logger only).
SHOWN = {
    "train/episode_return": "return",
    "eval/episode_return": "eval_return",
    "loss": "loss",
}


class MeepleProgressBar(RichProgressBar):
    def get_metrics(self, trainer, pl_module):
        metrics = super().get_metrics(trainer, pl_module)
        return {SHOWN[k]: v for k, v in metrics.items() if k in SHOWN}
