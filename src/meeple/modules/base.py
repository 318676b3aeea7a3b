"""Plumbing shared by on-policy phases: per-rollout metrics and timing.

Subclasses implement the learning math (losses, advantages, optimisers); this
base logs what the data side measured for each rollout.
"""

from __future__ import annotations

import time

import lightning as L

# Shown live in the progress bar.
PROGRESS_KEYS = ("train/episode_return",)


class RolloutModule(L.LightningModule):
    def on_train_epoch_start(self) -> None:
        self._epoch_start = time.perf_counter()

    def on_train_epoch_end(self) -> None:
        datamodule = self.trainer.datamodule
        stats = dict(getattr(datamodule, "stats", {}))
        frames = getattr(datamodule, "frames_per_batch", 0)
        stats["perf/iteration_frames_per_s"] = frames / max(time.perf_counter() - self._epoch_start, 1e-9)
        for key, value in stats.items():
            self.log(key, value, prog_bar=key in PROGRESS_KEYS, on_step=False, on_epoch=True)
