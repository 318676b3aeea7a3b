"""The collector -> Lightning bridge for on-policy learning.

One Lightning epoch is one rollout and one batch: iterating :class:`RolloutDataset` collects
``frames_per_batch`` frames with the current weights, attaches advantages, and yields them as
one :class:`RolloutBatch` with the shuffled minibatch order of ``ppo_epochs`` passes. What it
collects with (the policy, the advantage function, the league's env hooks) comes in as a
:class:`RolloutLearner` from the phase's builder: the datamodule never calls into the
LightningModule on its own.
Weights reach the actors at that boundary; every rollout is stamped with the
``policy_version`` it was collected with.

Checkpoints (taken at rollout boundaries) hold :meth:`RolloutDataModule.state_dict`: the
data-side progress, the shuffle generator and, when the env backend supports snapshots
and one process collects, the collector's in-flight episodes (simulator state and the
carried observation, ``episode_reward`` and ``step_count``), so a resumed run continues
exactly where the saved one stood.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import lightning as L
import torch
from tensordict import TensorDict, TensorDictBase
from torch.utils.data import DataLoader, IterableDataset
from torchrl.collectors import BaseCollector, Collector
from torchrl.envs import EnvBase

from meeple.data.collectors import build_collector
from meeple.env_factory import backend_env
from meeple.plugins.spec import EnvSnapshots, SnapshotUnsupported
from meeple.seeding import Component, PhaseSeeds, SeedStream, SeedStreams, reseed_rank
from meeple.tracking.keys import FRAMES_PER_S, TRAIN_RETURN

log = logging.getLogger(__name__)


def _identity(x: Any) -> Any:
    return x


@dataclass(frozen=True)
class RolloutLearner:
    """The learner's side of collection, as the phase's builder wires it."""

    policy: torch.nn.Module  # what the collector acts with (the module's own, moved with it)
    advantages: Callable[[TensorDictBase], TensorDictBase]  # writes advantage and value_target
    prepare_env: Callable[[EnvBase], None] | None = None  # in-process envs: called on each before its first reset
    remote_env_hook: Callable[[], Any] | None = None  # collector=ray: steers the actors' envs per rollout

    @property
    def device(self) -> torch.device:
        """Where the policy sits now (Lightning moves the module, and so the policy, before the
        first rollout)."""
        return next(self.policy.parameters()).device


class RolloutDataModule(SeedStreams, L.LightningDataModule):
    def __init__(
        self,
        *,
        learner: RolloutLearner,
        env_fn: Callable[..., EnvBase],
        seeds: PhaseSeeds,
        num_workers: int,
        num_envs: int,
        rollout_steps: int,
        ppo_epochs: int,
        minibatch_size: int,
        collector_type: str,
        env_snapshots: EnvSnapshots | None = None,
        batch_unit: int = 1,
        collector_options: dict | None = None,
    ) -> None:
        """``env_fn(num_envs=, seed=)`` builds one worker's batch of ``num_envs`` envs;
        ``env_snapshots`` (the backend's, optional) lets checkpoints capture its envs;
        ``batch_unit``: every batch ``env_fn`` builds is a multiple of it (evaluation rounds up)."""
        super().__init__()
        self.learner = learner
        self.env_fn = env_fn
        self.seeds = seeds
        self.worker_seeds = seeds.worker_seeds(Component.ENV, num_workers)
        self.num_envs = num_envs
        self.rollout_steps = rollout_steps
        self.ppo_epochs = ppo_epochs
        self.minibatch_size = minibatch_size
        self.collector_type = collector_type
        self.collector_options = dict(collector_options or {})
        self.env_snapshots = env_snapshots
        self.batch_unit = batch_unit
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
        self._streams: dict[Component, SeedStream] = {}
        self._resumed = False  # set by load_state_dict: the collector starts from a checkpoint
        self._saved_collector: dict | None = None
        self._snapshot_warned = False
        self.ranks: list[dict] | None = None  # several learner processes: each rank's seeds (see _gather_rank_info)

    # -- lifecycle -------------------------------------------------------------
    def setup(self, stage: str) -> None:
        """Nothing to build yet: Lightning moves the module to its device only after setup."""

    def start(self) -> None:
        """Build the collector around the learner's policy, on the training device (idempotent).

        Called at the first rollout, when the policy already sits on the device it will
        train on, so the collector acts with that very module instead of a copy.
        """
        if self.collector is not None:
            return
        learner = self.learner
        seeds, saved = self.worker_seeds, self._saved_collector
        world = self.trainer.world_size
        exact = saved is not None and self.env_snapshots is not None and self._single_process() and world == 1
        if self._resumed and not exact:
            # No snapshot of the envs: fresh episodes on seeds that depend on where the run resumes.
            seeds = self.seeds.restart_seeds(Component.ENV, len(seeds), self.policy_version)
            if world > 1:
                why = "a checkpoint holds rank 0's envs only, so every rank restarts its own"
            elif saved is None:
                why = "the checkpoint holds no env snapshot (backend without get_sim_state, or several collector processes)"
            else:
                why = "this run cannot restore the saved env snapshot"
            log.warning("resume is not bit-exact: %s; envs restart from fresh episodes", why)
        env_fns = [partial(self.env_fn, num_envs=self.num_envs, seed=s) for s in seeds]
        env_hook = None
        if self.collector_type == "ray" and learner.remote_env_hook is not None:
            env_hook = learner.remote_env_hook()  # the envs live in actors: the learner steers them per rollout
        elif learner.prepare_env is not None:  # e.g. the league seats its networks
            env_fns = [partial(_prepared, fn, learner.prepare_env) for fn in env_fns]
        self.collector = build_collector(
            self.collector_type,
            env_fns,
            learner.policy,
            frames_per_batch=self.frames_per_batch,
            policy_device=self.learner.device,
            options=self.collector_options,
            restart_fn=self._replacement_env_fn,
            env_hook=env_hook,
        )
        if self._resumed and exact:
            self._restore_collector(saved)
        self._resumed, self._saved_collector = False, None
        self._batches = iter(self.collector)

    def teardown(self, stage: str) -> None:
        if self.collector is not None:
            self.collector.shutdown()
            self.collector = None
            self._batches = None

    def on_exception(self, exception: BaseException) -> None:
        # Lightning tears a datamodule down only after a fit that ends normally: without this a
        # failed or pruned run would leave its collector's processes (and Ray) behind in this
        # process, e.g. for a sweep's next trial.
        self.teardown("fit")

    # -- checkpoint state (Lightning stores it with every checkpoint) ---------
    def state_dict(self) -> dict:
        return {
            "policy_version": self.policy_version,
            "frames": self.frames,
            "generator": self.generator.get_state(),
            "last_return": self._last_return,
            "last_length": self._last_length,
            "stats": dict(self.stats),
            "collector": self._collector_state(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.policy_version = state["policy_version"]
        self.frames = state["frames"]
        self.generator.set_state(state["generator"])
        self._last_return, self._last_length = state["last_return"], state["last_length"]
        self.stats = dict(state["stats"])
        self._saved_collector = state["collector"]
        self._resumed = True
        if self.collector is not None:  # loaded into a running datamodule: rebuild at the next rollout
            self.teardown("fit")

    def _replacement_env_fn(self, worker: int, restart: int) -> Callable[[], EnvBase]:
        """The env factory of a collector worker that replaces a dead one: fresh episodes on seeds
        of its own (depending on the rollout and the restart count, so a rerun repeats them)."""
        seed = self.seeds.restart_seeds(Component.ENV, len(self.worker_seeds) * (restart + 1),
                                        self.policy_version)[len(self.worker_seeds) * restart + worker]
        return partial(self.env_fn, num_envs=self.num_envs, seed=seed)

    def reseed_rank(self) -> None:
        """A rank > 0 resuming: streams of its own instead of rank 0's (RolloutCheckpoint calls it)."""
        reseed_rank(self.seeds, self.generator, self.policy_version)

    def _single_process(self) -> bool:
        return self.collector_type == "sync" or (self.collector_type == "auto" and len(self.worker_seeds) == 1)

    def _collector_state(self) -> dict | None:
        """The in-flight episodes of a single-process collector, when the backend can snapshot them."""
        collector = self.collector
        if not isinstance(collector, Collector) or self.env_snapshots is None:
            return None
        try:
            sim = self.env_snapshots.get_sim_state(backend_env(collector.env))
        except SnapshotUnsupported as err:
            if not self._snapshot_warned:
                log.warning("checkpoints hold no env snapshot (%s): a resume restarts episodes", err)
                self._snapshot_warned = True
            return None
        return {
            "sim": sim,
            "carrier": collector._carrier.to_dict(),  # next observation, episode_reward, step_count
            "frames": collector._frames,
            "iter": collector._iter,
            "traj_pool": collector._traj_pool.state_dict() if collector.track_traj_ids else None,
        }

    def _restore_collector(self, state: dict) -> None:
        collector = self.collector
        self.env_snapshots.set_sim_state(backend_env(collector.env), state["sim"])
        collector._carrier.update(TensorDict(state["carrier"], batch_size=collector._carrier.batch_size))
        collector._frames, collector._iter = state["frames"], state["iter"]
        if state["traj_pool"] is not None and collector.track_traj_ids:
            collector._traj_pool.load_state_dict(state["traj_pool"])

    def train_dataloader(self) -> DataLoader:
        return DataLoader(RolloutDataset(self), batch_size=None, collate_fn=_identity)

    # -- one rollout -----------------------------------------------------------
    def next_rollout(self) -> TensorDictBase:
        """Collect one rollout with the current weights and attach advantages."""
        self.start()
        if self.policy_version > 0:
            # Rollout boundary: the learner's weights go to every actor.
            self.collector.update_policy_weights_()
        start = time.perf_counter()
        rollout = next(self._batches)
        collect_s = time.perf_counter() - start
        rollout["policy_version"] = torch.full(rollout.batch_size, self.policy_version, dtype=torch.int64)
        rollout = self.learner.advantages(rollout.to(self.learner.device))
        world = self.trainer.world_size
        if world > 1 and self.ranks is None:
            self.ranks = _gather_rank_info(self, rollout)
        self.frames += rollout.numel() * world  # every rank collects as many (frames: the run's, all ranks)
        self._record_stats(rollout, collect_s, world)
        self.policy_version += 1
        return rollout

    def _record_stats(self, rollout: TensorDictBase, collect_s: float, world: int = 1) -> None:
        done = rollout["next", "done"].squeeze(-1)
        if done.any():
            self._last_return = rollout["next", "episode_reward"].squeeze(-1)[done].float().mean().item()
            self._last_length = rollout["next", "step_count"].squeeze(-1)[done].float().mean().item()
        self.stats = {
            "train/frames": float(self.frames),
            "train/episodes": float(done.sum().item()),
            FRAMES_PER_S: world * rollout.numel() / max(collect_s, 1e-9),  # ranks collect in lockstep
            "perf/policy_lag": float(self.policy_version - rollout["policy_version"].min().item()),
        }
        # Mean over episodes that ended in this rollout (the last value carries over
        # while no episode ends, so curves stay continuous).
        if self._last_return is not None:
            self.stats[TRAIN_RETURN] = self._last_return
            self.stats["train/episode_length"] = self._last_length


def _gather_rank_info(dm: RolloutDataModule, rollout: TensorDictBase) -> list[dict]:
    """Every rank's env seeds, sampling seed and a fingerprint of its first rollout (the run
    directory records them: ranks that acted alike would show equal fingerprints)."""
    key = "observation" if "observation" in rollout.keys() else "action"
    digest = hashlib.sha256(rollout[key].detach().cpu().contiguous().numpy().tobytes()).hexdigest()[:16]
    mine = dict(rank=dm.trainer.global_rank, env_seeds=list(dm.worker_seeds), data_seed=dm.seeds.seed(Component.DATA),
                first_rollout_sha256=digest)
    gathered: list = [None] * dm.trainer.world_size
    torch.distributed.all_gather_object(gathered, mine)
    return gathered


def _prepared(env_fn: Callable[[], EnvBase], prepare: Callable[[EnvBase], None]) -> EnvBase:
    env = env_fn()
    prepare(backend_env(env))
    return env


@dataclass(frozen=True)
class RolloutBatch:
    """One rollout, handed to one ``training_step``: its frames and the minibatch order of every
    PPO epoch (drawn from the datamodule's generator, so checkpoints capture the shuffle)."""

    data: TensorDictBase  # [frames], advantages attached
    order: tuple[torch.Tensor, ...]  # ppo_epochs * minibatches_per_epoch index tensors

    def __len__(self) -> int:
        return len(self.order)

    def __iter__(self) -> Iterator[TensorDictBase]:
        for index in self.order:
            yield self.data[index]

    def to(self, device: torch.device | str, **kwargs: Any) -> RolloutBatch:
        """Lightning moves batches with ``to``; the rollout already sits on the module's device."""
        if self.data.device is not None and self.data.device == torch.device(device):
            return self
        return RolloutBatch(self.data.to(device), tuple(i.to(device) for i in self.order))


class RolloutDataset(IterableDataset):
    """Each iteration is one rollout as one :class:`RolloutBatch` (one Lightning batch): the
    module runs its ``ppo_epochs`` shuffled passes of minibatches inside one ``training_step``.
    Lightning's per-batch loop cost 0.4 ms per minibatch (6.3 ms of a 1,024-frame rollout's
    update on the default env, ``python -m meeple.bench ppo``), paid once per rollout this way."""

    def __init__(self, datamodule: RolloutDataModule) -> None:
        self.dm = datamodule

    def __len__(self) -> int:
        return 1

    def __iter__(self) -> Iterator[RolloutBatch]:
        dm = self.dm
        flat = dm.next_rollout().reshape(-1)
        size = dm.minibatch_size
        order = []
        for _ in range(dm.ppo_epochs):
            permutation = torch.randperm(flat.numel(), generator=dm.generator).to(flat.device)
            order.extend(permutation[i * size : (i + 1) * size] for i in range(dm.minibatches_per_epoch))
        yield RolloutBatch(flat, tuple(order))
