"""``collector=ray``: env collection in Ray actors, one per env worker (``env.num_workers``).

Each actor holds a TorchRL ``Collector`` over its batch of envs and a copy of the policy. At every
rollout boundary the learner puts its current weights in Ray's object store once and asks every
actor for one rollout acted with them, so rollouts are on-policy (policy lag 0) and stamped with
the learner's policy version. The weights travel as Ray task arguments rather than through
TorchRL's ``RayCollector`` weight sync, whose torch.distributed TCP store timed out (60 s) on a
loaded 2-core machine (docs/scaling.md).

``collector.address``: null starts a Ray instance in this process (stopped at the end); an
address (``127.0.0.1:6379``, or ``auto``) joins a running cluster (``ray start --head`` on one
machine, ``ray start --address=...`` on the others). An actor that dies is replaced once per
rollout by a new one on fresh seeds (logged); a second death in the same rollout is an error.
"""

from __future__ import annotations

import copy
import logging
import os
from collections.abc import Callable, Sequence

import torch
from tensordict import TensorDictBase
from torchrl.collectors import Collector
from torchrl.envs import EnvBase

from meeple.errors import ConfigError, PeerLost

log = logging.getLogger(__name__)


class _CollectorActor:
    """Runs in a Ray worker process: one env batch, one policy copy, one rollout per call."""

    def __init__(self, env_fn: Callable[[], EnvBase], policy: torch.nn.Module, frames_per_batch: int) -> None:
        torch.set_num_threads(1)
        self.policy = policy
        self.collector = Collector(env_fn(), policy, frames_per_batch=frames_per_batch, total_frames=-1,
                                   auto_register_policy_transforms=False)
        self.rollouts = iter(self.collector)

    def collect(self, weights: dict[str, torch.Tensor]) -> TensorDictBase:
        self.policy.load_state_dict(weights)
        return next(self.rollouts)

    def pid(self) -> int:
        return os.getpid()

    def close(self) -> None:
        self.collector.shutdown()


class RayActorsCollector:
    """The collector interface ``RolloutDataModule`` uses (iterate, ``update_policy_weights_``,
    ``shutdown``), over Ray actors."""

    def __init__(self, env_fns: Sequence[Callable[[], EnvBase]], policy: torch.nn.Module, *, frames_per_batch: int,
                 address: str | None = None, cpus_per_actor: float = 1.0,
                 restart_fn: Callable[[int, int], Callable[[], EnvBase]] | None = None) -> None:
        """``restart_fn(worker, restarts)``: the env factory of a replacement for actor ``worker``."""
        try:
            import ray
        except ImportError:
            raise ConfigError("collector=ray needs Ray: pip install -e '.[ray]'; accepted otherwise: "
                              "collector=auto, sync or multisync") from None
        if not env_fns:
            raise ConfigError("collector=ray needs at least one env worker; accepted: env.num_workers >= 1")
        if frames_per_batch % len(env_fns):
            raise ConfigError(f"collector=ray splits {frames_per_batch} frames over {len(env_fns)} actors unevenly")
        self._ray = ray
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            options = dict(include_dashboard=False, log_to_driver=False, configure_logging=False)
            if address:
                ray.init(address=address, **options)
            else:  # one logical CPU per actor even on a smaller machine (they mostly wait on envs)
                ray.init(num_cpus=len(env_fns) * cpus_per_actor, **options)
        self.policy = policy
        self.frames_per_actor = frames_per_batch // len(env_fns)
        self._actor_class = ray.remote(num_cpus=cpus_per_actor)(_CollectorActor)
        self._restart_fn = restart_fn
        self.restarts = 0
        self.actors = [self._start(fn) for fn in env_fns]

    def _start(self, env_fn: Callable[[], EnvBase]):
        return self._actor_class.remote(env_fn, copy.deepcopy(self.policy).cpu(), self.frames_per_actor)

    def update_policy_weights_(self) -> None:
        """Nothing to push ahead: every rollout request carries the learner's current weights."""

    def __iter__(self) -> RayActorsCollector:
        return self

    def __next__(self) -> TensorDictBase:
        ray = self._ray
        weights = ray.put({k: v.detach().cpu() for k, v in self.policy.state_dict().items()})
        parts = [actor.collect.remote(weights) for actor in self.actors]
        rollouts = []
        for worker, ref in enumerate(parts):
            try:
                rollouts.append(ray.get(ref))
            except ray.exceptions.RayActorError as err:
                rollouts.append(self._replace(worker, weights, err))
        # Each actor's rollout is [its envs, steps]: stack the envs of all actors.
        return torch.cat(rollouts, 0)

    def _replace(self, worker: int, weights, err: Exception) -> TensorDictBase:
        if self._restart_fn is None:
            raise PeerLost(f"Ray actor {worker} of collector=ray died ({str(err).splitlines()[0][:200]})") from None
        self.restarts += 1
        log.warning("Ray actor %d of collector=ray died (%s); replacing it with one on fresh seeds (restart %d)",
                    worker, str(err).splitlines()[0][:200], self.restarts)
        self.actors[worker] = self._start(self._restart_fn(worker, self.restarts))
        try:
            return self._ray.get(self.actors[worker].collect.remote(weights))
        except self._ray.exceptions.RayActorError as again:
            raise PeerLost(f"Ray actor {worker} of collector=ray died again right after its replacement "
                           f"({str(again).splitlines()[0][:200]})") from None

    def actor_pids(self) -> list[int]:
        return self._ray.get([actor.pid.remote() for actor in self.actors])

    def shutdown(self) -> None:
        ray = self._ray
        for actor in self.actors:
            try:
                ray.get(actor.close.remote(), timeout=30)
            except Exception:  # a dead actor has nothing to close
                pass
            ray.kill(actor)
        self.actors = []
        if self._owns_ray:
            ray.shutdown()
