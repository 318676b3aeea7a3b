"""The collector -> Lightning bridge for on-policy learning.

One Lightning epoch is one rollout: iterating :class:`RolloutDataset` collects
``frames_per_batch`` frames with the current weights, has the LightningModule
compute advantages, and yields shuffled minibatches for ``ppo_epochs`` passes.
Weights reach the actors at that boundary; every rollout is stamped with the
``policy_version`` it was collected with.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import lightning as L
import torch
from tensordict import TensorDictBase
from torch.utils.data import DataLoader, IterableDataset
from torchrl.collectors import BaseCollector
from torchrl.envs import EnvBase

from meeple.data.collectors import build_collector
from meeple.seeding import Component, PhaseSeeds


def _identity(x: Any) -> Any:
    return x


class RolloutDataModule(L.LightningDataModule):
    def __init__(
        self,
        *,
        env_fn: Callable[..., EnvBase],
        seeds: PhaseSeeds,
        num_workers: int,
        num_envs: int,
        rollout_steps: int,
        ppo_epochs: int,
        minibatch_size: int,
        collector_type: str,
    ) -> None:
        """``env_fn(num_envs=, seed=)`` builds one worker's batch of ``num_envs`` envs."""
        super().__init__()
        self.env_fn = env_fn
        self.seeds = seeds
        self.worker_seeds = seeds.worker_seeds(Component.ENV, num_workers)
        self.num_envs = num_envs
        self.rollout_steps = rollout_steps
        self.ppo_epochs = ppo_epochs
        self.minibatch_size = minibatch_size
        self.collector_type = collector_type
        self.frames_per_batch = num_envs * len(self.worker_seeds) * rollout_steps
        self.minibatches_per_epoch = self.frames_per_batch // minibatch_size
        self.generator = torch.Generator().manual_seed(seeds.seed(Component.DATA))
        self.collector: BaseCollector | None = None
        self._batches: Iterator[TensorDictBase] | None = None
        self.policy_version = 0
        self.frames = 0
        self.stats: dict[str, float] = {}
        self._last_return: float | None = None
        self._last_length: float | None = None

    # -- lifecycle -------------------------------------------------------------
    def setup(self, stage: str) -> None:
        """Nothing to build yet: Lightning moves the module to its device only after setup."""

    def start(self) -> None:
        """Build the collector around the module's policy, on the module's device (idempotent).

        Called at the first rollout, when the policy already sits on the device it will
        train on, so the collector acts with that very module instead of a copy.
        """
        if self.collector is not None:
            return
        module = self.trainer.lightning_module
        env_fns = [partial(self.env_fn, num_envs=self.num_envs, seed=s) for s in self.worker_seeds]
        self.collector = build_collector(
            self.collector_type,
            env_fns,
            module.policy,
            frames_per_batch=self.frames_per_batch,
            policy_device=module.device,
        )
        self._batches = iter(self.collector)

    def teardown(self, stage: str) -> None:
        if self.collector is not None:
            self.collector.shutdown()
            self.collector = None
            self._batches = None

    def seed_stream(self, component: Component) -> Iterator[int]:
        return self.seeds.stream(component)

    def train_dataloader(self) -> DataLoader:
        return DataLoader(RolloutDataset(self), batch_size=None, collate_fn=_identity)

    # -- one rollout -----------------------------------------------------------
    def next_rollout(self) -> TensorDictBase:
        """Collect one rollout with the current weights and attach advantages."""
        module = self.trainer.lightning_module
        self.start()
        if self.policy_version > 0:
            # Rollout boundary: the learner's weights go to every actor.
            self.collector.update_policy_weights_()
        start = time.perf_counter()
        rollout = next(self._batches)
        collect_s = time.perf_counter() - start
        rollout["policy_version"] = torch.full(rollout.batch_size, self.policy_version, dtype=torch.int64)
        rollout = module.compute_advantages(rollout.to(module.device))
        self.frames += rollout.numel()
        self._record_stats(rollout, collect_s)
        self.policy_version += 1
        return rollout

    def _record_stats(self, rollout: TensorDictBase, collect_s: float) -> None:
        done = rollout["next", "done"].squeeze(-1)
        if done.any():
            self._last_return = rollout["next", "episode_reward"].squeeze(-1)[done].float().mean().item()
            self._last_length = rollout["next", "step_count"].squeeze(-1)[done].float().mean().item()
        self.stats = {
            "train/frames": float(self.frames),
            "train/episodes": float(done.sum().item()),
            "perf/frames_per_s": rollout.numel() / max(collect_s, 1e-9),
            "perf/policy_lag": float(self.policy_version - rollout["policy_version"].min().item()),
        }
        # Mean over episodes that ended in this rollout (the last value carries over
        # while no episode ends, so curves stay continuous).
        if self._last_return is not None:
            self.stats["train/episode_return"] = self._last_return
            self.stats["train/episode_length"] = self._last_length


class RolloutDataset(IterableDataset):
    """Each iteration is one rollout's minibatches: ``ppo_epochs`` shuffled passes."""

    def __init__(self, datamodule: RolloutDataModule) -> None:
        self.dm = datamodule

    def __len__(self) -> int:
        return self.dm.ppo_epochs * self.dm.minibatches_per_epoch

    def __iter__(self) -> Iterator[TensorDictBase]:
        dm = self.dm
        flat = dm.next_rollout().reshape(-1)
        size = dm.minibatch_size
        for _ in range(dm.ppo_epochs):
            order = torch.randperm(flat.numel(), generator=dm.generator).to(flat.device)
            for i in range(dm.minibatches_per_epoch):
                yield flat[order[i * size : (i + 1) * size]]
