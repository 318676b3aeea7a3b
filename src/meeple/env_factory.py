"""Backend-neutral env construction: plugin env + the core's episode bookkeeping.

Above both ``meeple.envs`` and ``meeple.transport`` (it may hand back a ``RemoteEnv``, which
hosts envs of ``meeple.envs`` in a server), so neither of those imports the other's way up.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from omegaconf import DictConfig, OmegaConf
from torchrl.envs import Compose, EnvBase, RewardSum, StepCounter, TransformedEnv

from meeple.plugins.registry import load_backend
from meeple.plugins.spec import EnvSnapshots


def make_env(
    env_cfg: Mapping[str, Any],
    *,
    num_envs: int,
    seed: int,
    device: str = "cpu",
    transport: Mapping[str, Any] | None = None,
    evaluation: bool = False,
) -> EnvBase:
    """A seeded batch of ``num_envs`` envs from the backend named by ``env_cfg['backend']``.

    Adds ``episode_reward`` and ``step_count`` so returns and lengths can be read
    at done steps whatever the backend. Module-level and fed plain dicts so it
    pickles into collector worker processes. ``transport`` (``conf/transport``) other
    than ``inproc`` puts the envs in an env server (``meeple.transport.client.RemoteEnv``).
    ``evaluation``: a batch for evaluation; with a running server (``transport.address``),
    whose envs the collector drives, it gets a server of its own.
    """
    if is_remote(transport):
        from meeple.transport.client import make_remote_env

        env = make_remote_env(
            env_cfg, transport, num_envs=num_envs, device=device, evaluation=evaluation
        )
    else:
        backend = load_backend(env_cfg["backend"])
        env = backend.make_env(env_cfg, num_envs=num_envs, device=device)
    env = TransformedEnv(env, Compose(RewardSum(), StepCounter()))
    env.set_seed(seed)
    return env


def batch_unit(env_cfg: Mapping[str, Any]) -> int:
    """The backend's smallest batch: every ``num_envs`` it builds is a multiple of it.

    1 for most backends; a backend whose batch is made of groups (a table game: one slot
    per learner seat at each table) says so with an optional ``batch_unit(env_cfg)``.
    """
    unit = getattr(load_backend(env_cfg["backend"]), "batch_unit", None)
    return int(unit(env_cfg)) if unit is not None else 1


def round_to_unit(n: int, unit: int) -> int:
    """``n`` rounded up to a multiple of ``unit`` (at least one unit)."""
    return max(-(-n // unit), 1) * unit


def is_remote(transport: Mapping[str, Any] | None) -> bool:
    return transport is not None and transport.get("type", "inproc") != "inproc"


def env_snapshots(
    env_cfg: Mapping[str, Any], transport: Mapping[str, Any] | None = None
) -> EnvSnapshots | None:
    """The backend's optional snapshot functions (exact resume), or None when it has none.

    They act on the backend's own env: pass ``env.base_env`` of an env from :func:`make_env`.
    Envs behind a transport live in a server, out of reach: None.
    """
    if is_remote(transport):
        return None
    backend = load_backend(env_cfg["backend"])
    return backend if isinstance(backend, EnvSnapshots) else None


@dataclass(frozen=True)
class EnvSource:
    """How a phase builds the run's envs (``env_fn(num_envs=, seed=)``) and what they look like."""

    env_fn: Callable[..., EnvBase]
    env_cfg: dict[str, Any]
    transport_cfg: dict[str, Any]
    unit: int  # every batch env_fn builds is a multiple of it (batch_unit)
    observation_spec: Any
    action_spec: Any


def env_source(env: DictConfig | Mapping[str, Any], transport: DictConfig | Mapping[str, Any], *,
               seed: int) -> EnvSource:
    """The env factory of a run and its specs, read from a throwaway batch of one unit (so a
    model is built before any collector). An unknown backend lists the installed ones."""
    env_cfg = OmegaConf.to_container(env, resolve=True) if isinstance(env, DictConfig) else dict(env)
    transport_cfg = (OmegaConf.to_container(transport, resolve=True) if isinstance(transport, DictConfig)
                     else dict(transport))
    load_backend(env_cfg["backend"])
    env_fn = partial(make_env, env_cfg, transport=transport_cfg)
    unit = batch_unit(env_cfg)
    probe = env_fn(num_envs=unit, seed=seed)
    try:
        return EnvSource(env_fn, env_cfg, transport_cfg, unit, probe.observation_spec, probe.action_spec)
    finally:
        probe.close()


def backend_env(env: EnvBase) -> EnvBase:
    """The backend's own env under the core's transforms."""
    while isinstance(env, TransformedEnv):
        env = env.base_env
    return env
