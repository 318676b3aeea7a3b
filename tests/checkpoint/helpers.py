"""Test-only callbacks, referenced from configs by ``_target_``."""

from __future__ import annotations

import lightning as L


class SimulatedCrash(RuntimeError):
    """What :class:`CrashAfterRollouts` raises: the process dies between two rollouts."""


class CrashAfterRollouts(L.Callback):
    """Crashes the run right after the checkpoint of rollout ``rollouts`` (when the next rollout
    starts), as a kill at that moment would: the stage is left unfinished for resume=true."""

    def __init__(self, rollouts: int) -> None:
        self.rollouts = rollouts

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.current_epoch >= self.rollouts:
            raise SimulatedCrash(f"simulated crash after rollout {self.rollouts}")
