"""Plumbing shared by on-policy phases: the optimiser step, per-rollout metrics, timing.

Subclasses implement the learning math (losses, advantages, optimisers), call
:meth:`optimize` with their loss and hand per-minibatch values to :meth:`accumulate`.
Optimisation is manual: Lightning's automatic loop (closure, hooks) cost ~3 ms
per minibatch on CartPole, a third of the whole update. Lightning's ``self.log`` costs
about 0.8 ms per call (measured by ``python -m meeple.bench ppo``: half of a
minibatch step), so minibatch values are summed as tensors and logged once per
rollout, together with what the data side measured for the rollout.
"""

from __future__ import annotations

import time

import lightning as L
import torch

from meeple.tracking.keys import TRAIN_RETURN

# Shown in the progress bar at the end of each rollout (see callbacks/progress.py).
PROGRESS_KEYS = (TRAIN_RETURN,)


class RolloutModule(L.LightningModule):
    def __init__(self, max_grad_norm: float | None = None) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.max_grad_norm = max_grad_norm
        self._sums: dict[str, torch.Tensor] = {}
        self._count = 0
        self.live: dict[str, torch.Tensor] = {}  # latest minibatch values for the progress bar

    def optimize(self, loss: torch.Tensor) -> None:
        """One optimiser step: zero grads, backward (precision-aware), clip by norm, step."""
        optimizer = self.optimizers()
        optimizer.zero_grad(set_to_none=True)
        self.manual_backward(loss)
        if self.max_grad_norm is not None:
            self.clip_gradients(optimizer, gradient_clip_val=self.max_grad_norm, gradient_clip_algorithm="norm")
        optimizer.step()

    def set_warmup(self, epochs: int, start_fraction: float) -> None:
        """Warm the learning rate up linearly from ``start_fraction`` of its peak over ``epochs``
        rollouts (a stage that starts from another's weights: transition.warmup)."""
        self.warmup = (epochs, start_fraction)

    def with_linear_anneal(self, optimizer: torch.optim.Optimizer, anneal: bool):
        """``optimizer`` alone, or with its learning rate decayed linearly to zero over the run
        and/or warmed up (stepped once per epoch, i.e. per rollout; see ``on_train_epoch_end``)."""
        warm_epochs, start = getattr(self, "warmup", (0, 1.0))
        if not anneal and warm_epochs == 0:
            return optimizer
        epochs = max(int(self.trainer.max_epochs or 1), 1)

        def factor(e: int) -> float:
            warm = start + (1.0 - start) * min(e / warm_epochs, 1.0) if warm_epochs else 1.0
            return warm * (max(1.0 - e / epochs, 0.0) if anneal else 1.0)

        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
        return {"optimizer": optimizer, "lr_scheduler": schedule}

    def accumulate(self, metrics: dict[str, torch.Tensor]) -> None:
        """Add one minibatch's scalar metrics (no host sync, no logger call)."""
        for key, value in metrics.items():
            value = value.detach().float()
            self._sums[key] = self._sums[key] + value if key in self._sums else value
        self._count += 1

    def on_train_epoch_start(self) -> None:
        self._epoch_start = time.perf_counter()
        self._sums, self._count = {}, 0

    def on_train_epoch_end(self) -> None:
        scheduler = self.lr_schedulers()
        if scheduler is not None:
            scheduler.step()  # schedules count rollouts
        datamodule = self.trainer.datamodule
        logged: dict[str, float | torch.Tensor] = {k: v / max(self._count, 1) for k, v in self._sums.items()}
        logged.update(getattr(datamodule, "stats", {}))
        frames = getattr(datamodule, "frames_per_batch", 0)
        logged["perf/iteration_frames_per_s"] = frames / max(time.perf_counter() - self._epoch_start, 1e-9)
        for key, value in logged.items():
            self.log(key, value, prog_bar=key in PROGRESS_KEYS, on_step=False, on_epoch=True)
