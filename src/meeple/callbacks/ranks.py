"""Multi-process (DDP) runs: what callbacks share across ranks, and the check that every rank
ends training with the same weights."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, TypeVar

import lightning as L
import torch
import torch.distributed as dist

T = TypeVar("T")


class RanksInSync(L.Callback):
    """At the end of training every rank holds the same weights (gradients averaged, steps taken
    together); a rank that drifted is an error, not a quietly worse model. Compares a SHA-256 of
    each rank's parameters (``build_stage`` adds this callback when the profile has several)."""

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.world_size < 2:
            return
        digests: list = [None] * trainer.world_size
        dist.all_gather_object(digests, weights_digest(pl_module))
        if len(set(digests)) > 1:
            raise RuntimeError(f"the learner processes hold different weights at the end of training (by rank: "
                               f"{digests}): gradients were not averaged across ranks")


def weights_digest(module: torch.nn.Module) -> str:
    digest = hashlib.sha256()
    for name, param in sorted(module.named_parameters(), key=lambda item: item[0]):
        digest.update(name.encode())
        digest.update(param.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def on_rank_zero(trainer: L.Trainer, compute: Callable[[], T]) -> T:
    """``compute()`` (an evaluation, a gate's match) on rank 0 only, its result on every rank:
    several learners hold the same weights, so one evaluation serves all, and every rank then
    takes the same decisions from it (stop, promote, checkpoint). Call it on every rank."""
    if trainer.world_size < 2:
        return compute()
    value = compute() if trainer.global_rank == 0 else None
    return trainer.strategy.broadcast(value, src=0)


def log_shared(module: L.LightningModule, metrics: dict[str, float], **options: Any) -> None:
    """``module.log`` of values every rank holds alike (from :func:`on_rank_zero`)."""
    sync = module.trainer.world_size > 1  # equal values: the mean over ranks is the value
    for key, value in metrics.items():
        module.log(key, value, on_step=False, on_epoch=True, sync_dist=sync, **options)
