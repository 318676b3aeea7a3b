"""``collector=ray`` for PPO: env collection in Ray actors, one per env worker (``env.num_workers``).

Each actor holds a TorchRL ``Collector`` over its batch of envs and a copy of the policy. At every
rollout boundary the learner puts its current weights in Ray's object store once and asks every
actor for one rollout acted with them, so rollouts are on-policy (policy lag 0) and stamped with
the learner's policy version. The weights travel as Ray task arguments rather than through
TorchRL's ``RayCollector`` weight sync, whose torch.distributed TCP store timed out (60 s) on a
loaded 2-core machine (docs/scaling.md). Actor start-up, cluster address and the replacement of a
dead actor (on fresh seeds, once per rollout) are :class:`meeple.data.ray_pool.RayActorPool`'s.

An ``env_hook`` gives each actor's env state that the learner steers per rollout (the league's
seating, :mod:`meeple.phases.league.remote`). Learner side:

    hook.actor_part(i)        # picklable; lives in actor i: attach(env) before the first reset,
                              # begin(plan, weights) before each rollout, end() -> report after it
    hook.plans(put, actors)   # one plan per actor for the next rollout (put: into the object store)
    hook.receive(reports)     # the actors' reports, in actor order
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import torch
from tensordict import TensorDictBase
from torchrl.collectors import Collector
from torchrl.envs import EnvBase

from meeple.data.ray_pool import ActorProcess, RayActorPool, import_ray
from meeple.errors import ConfigError


class _CollectorActor(ActorProcess):
    """Runs in a Ray worker process: one env batch, one policy copy, one rollout per call.

    The collector is built at the first call, so a hook's first plan is there before the env's
    first reset."""

    def __init__(self, env_fn: Callable[[], EnvBase], policy: torch.nn.Module, frames_per_batch: int,
                 hook_part: Any = None) -> None:
        torch.set_num_threads(1)
        self.env_fn, self.policy, self.frames_per_batch, self.hook = env_fn, policy, frames_per_batch, hook_part
        self.collector: Collector | None = None

    def collect(self, weights: dict[str, torch.Tensor], plan: Any = None) -> TensorDictBase | tuple[TensorDictBase, Any]:
        self.policy.load_state_dict(weights)
        first = self.collector is None
        if first:
            env = self.env_fn()
            if self.hook is not None:
                self.hook.attach(env)
        if self.hook is not None:
            self.hook.begin(plan, weights)
        if first:  # the env's first reset happens here, after the hook's first plan
            self.collector = Collector(env, self.policy, frames_per_batch=self.frames_per_batch, total_frames=-1,
                                       auto_register_policy_transforms=False)
            self.rollouts = iter(self.collector)
        rollout = next(self.rollouts)
        return rollout if self.hook is None else (rollout, self.hook.end())

    def close(self) -> None:
        if self.collector is not None:
            self.collector.shutdown()


class RayActorsCollector:
    """The collector interface ``RolloutDataModule`` uses (iterate, ``update_policy_weights_``,
    ``shutdown``), over Ray actors."""

    def __init__(self, env_fns: Sequence[Callable[[], EnvBase]], policy: torch.nn.Module, *, frames_per_batch: int,
                 address: str | None = None, cpus_per_actor: float = 1.0,
                 restart_fn: Callable[[int, int], Callable[[], EnvBase]] | None = None, env_hook: Any = None) -> None:
        """``restart_fn(worker, restarts)``: the env factory of a replacement for actor ``worker``;
        ``env_hook``: per-actor env state steered by the learner (module doc)."""
        import_ray()
        if not env_fns:
            raise ConfigError("collector=ray needs at least one env worker; accepted: env.num_workers >= 1")
        if frames_per_batch % len(env_fns):
            raise ConfigError(f"collector=ray splits {frames_per_batch} frames over {len(env_fns)} actors unevenly")
        self.policy = policy
        self.frames_per_actor = frames_per_batch // len(env_fns)
        self._restart_fn = restart_fn
        self.env_hook = env_hook
        self.pool = RayActorPool(_CollectorActor, [self._actor_args(i, fn) for i, fn in enumerate(env_fns)],
                                 what="collector=ray",
                                 address=address, cpus_per_actor=cpus_per_actor,
                                 restart_args=self._restart_args if restart_fn is not None else None)

    def _actor_args(self, index: int, env_fn: Callable[[], EnvBase]) -> tuple:
        hook_part = self.env_hook.actor_part(index) if self.env_hook is not None else None
        return (env_fn, copy.deepcopy(self.policy).cpu(), self.frames_per_actor, hook_part)

    def _restart_args(self, worker: int, restarts: int) -> tuple:
        return self._actor_args(worker, self._restart_fn(worker, restarts))

    @property
    def restarts(self) -> int:
        return self.pool.restarts

    def update_policy_weights_(self) -> None:
        """Nothing to push ahead: every rollout request carries the learner's current weights."""

    def __iter__(self) -> RayActorsCollector:
        return self

    def __next__(self) -> TensorDictBase:
        weights = self.pool.put({k: v.detach().cpu() for k, v in self.policy.state_dict().items()})
        if self.env_hook is None:
            rollouts = self.pool.call("collect", [(weights,)] * len(self.pool))
        else:
            plans = self.env_hook.plans(self.pool.put, len(self.pool))
            rollouts, reports = zip(*self.pool.call("collect", [(weights, plan) for plan in plans]), strict=True)
            self.env_hook.receive(list(reports))
        # Each actor's rollout is [its envs, steps]: stack the envs of all actors.
        return torch.cat(list(rollouts), 0)

    def actor_pids(self) -> list[int]:
        return self.pool.pids()

    def shutdown(self) -> None:
        self.pool.shutdown()
