"""Test-only callbacks, referenced from configs by ``_target_``."""

from __future__ import annotations

import lightning as L


class StopAfterRollouts(L.Callback):
    """Ends training gracefully after ``rollouts`` rollouts: an interruption right after the
    checkpoint of that rollout (the checkpoint callback still saves, it runs after this one)."""

    def __init__(self, rollouts: int) -> None:
        self.rollouts = rollouts

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.current_epoch + 1 >= self.rollouts:
            trainer.should_stop = True
