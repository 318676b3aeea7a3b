"""Plumbing shared by on-policy phases: the optimiser step, per-rollout metrics, timing.

Subclasses implement the learning math (losses, advantages, optimisers), call
:meth:`optimize` with their loss and hand per-minibatch values to :meth:`accumulate`.
Optimisation is manual: Lightning's automatic loop (closure, hooks) cost ~3 ms
per minibatch on the default PPO run, a third of the whole update. Minibatch values are summed as
tensors and published once per rollout (:meth:`publish`), together with what the data
side measured for the rollout: Lightning's ``self.log`` costs ~0.2 ms per key and call
(measured by ``python -m meeple.bench ppo``).
"""

from __future__ import annotations

import time

import lightning as L
import torch

from meeple.phases.lr_schedule import lr_factor
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
        self.warmup = (0, 1.0)  # learning-rate warm-up: (rollouts, start fraction); see set_warmup

    def optimize(self, loss: torch.Tensor, only: set[int] | None = None) -> torch.Tensor:
        """One optimiser step: zero grads, backward (precision-aware), clip by norm, step; with
        ``only`` (parameter ids) every other parameter's gradient is dropped, so it does not move.
        Returns the gradient's norm before clipping (a tensor: no host sync)."""
        optimizer = self.optimizers()
        optimizer.zero_grad(set_to_none=True)
        self.manual_backward(loss)
        if only is not None:
            for p in self.parameters():
                if id(p) not in only:
                    p.grad = None
        norm = torch.nn.utils.get_total_norm([p.grad for p in self.parameters() if p.grad is not None])
        if self.max_grad_norm is not None:
            self.clip_gradients(optimizer, gradient_clip_val=self.max_grad_norm, gradient_clip_algorithm="norm")
        optimizer.step()
        return norm

    def log_at_optimizer_steps(self) -> None:
        """Call at the end of a ``training_step`` that took several optimiser steps.

        Lightning hands loggers its count of training batches as the step (one more after each
        ``training_step``); meeple's step axis is optimiser steps (``global_step``: MLflow's steps,
        checkpoint names, a pipeline's step offset), so the count is set to match.
        """
        self.trainer.fit_loop.epoch_loop._batches_that_stepped = self.trainer.global_step - 1

    def set_warmup(self, epochs: int, start_fraction: float) -> None:
        """Warm the learning rate up linearly from ``start_fraction`` of its peak over ``epochs``
        rollouts (a stage that starts from another's weights: transition.warmup)."""
        self.warmup = (epochs, start_fraction)

    def with_lr_schedule(self, optimizer: torch.optim.Optimizer, decay: str):
        """``optimizer`` alone, or with its learning rate decayed to zero over the run (``decay``:
        ``linear``, ``cosine``; ``constant`` keeps it) and/or warmed up; stepped once per epoch,
        i.e. per rollout (see ``on_train_epoch_end``)."""
        warm_epochs, start = self.warmup
        factor = lr_factor(max(int(self.trainer.max_epochs or 1), 1), decay, warmup=warm_epochs, start=start)
        if decay == "constant" and warm_epochs == 0:
            return optimizer
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
        logged.update(self.rollout_metrics())
        frames = getattr(datamodule, "frames_per_batch", 0)
        logged["perf/iteration_frames_per_s"] = frames / max(time.perf_counter() - self._epoch_start, 1e-9)
        self.publish(logged)

    def rollout_metrics(self) -> dict[str, float | torch.Tensor]:
        """Per-rollout values a subclass adds to what is published at the rollout's end."""
        return {}

    def publish(self, metrics: dict[str, float | torch.Tensor]) -> None:
        """One rollout's metrics, in one go: one batch to each logger, at the step and with the
        ``epoch`` Lightning's own epoch-end logging uses, and into the trainer's callback and
        progress-bar metrics (checkpoints, the stage's result, sweeps and the bar read those).

        What ``self.log(..., on_epoch=True)`` per key did, without its per-call bookkeeping:
        0.23 ms a key, 3.7 ms for PPO's 16 keys per rollout (``python -m meeple.bench ppo``).
        """
        trainer = self.trainer
        tensors = {k: v.detach() if isinstance(v, torch.Tensor) else torch.tensor(v) for k, v in metrics.items()}
        scalars = {k: v.item() for k, v in tensors.items()}
        trainer.callback_metrics.update(tensors)
        trainer.progress_bar_metrics.update({k: scalars[k] for k in PROGRESS_KEYS if k in scalars})
        # Lightning logs epoch-end metrics at its batch count less one (the last batch's step).
        step = trainer.fit_loop.epoch_loop._batches_that_stepped - 1
        for logger in trainer.loggers:
            logger.log_metrics({**scalars, "epoch": trainer.current_epoch}, step=step)
