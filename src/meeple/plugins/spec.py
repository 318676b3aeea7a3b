"""What an env backend plugin provides to the core.

A plugin is an installable package that declares an entry point in the group
``meeple.plugins``; the entry point's name is the backend name used in
``env.backend`` and its value is an object satisfying :class:`EnvBackend`.
Its Hydra configs live in ``<package>/conf/`` (found by the search-path plugin,
so the core never imports plugin code to compose a config).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # env servers load backends without importing torch
    from torchrl.envs import EnvBase


@runtime_checkable
class EnvBackend(Protocol):
    """A factory of TorchRL environments for one backend.

    ``make_env`` returns an env whose batch size is ``(num_envs,)`` and that
    steps all of them in one call (per-step overhead is paid per batch).
    Discrete actions are integer indices (``Categorical`` spec); an ``action_mask``
    observation (bool, one per action) makes the core's policies masked. The core adds
    episode bookkeeping transforms and seeds the env; the backend must not. A backend whose
    batches come in groups may define ``batch_unit(env_cfg) -> int``: every ``num_envs`` it
    is given is then a multiple of it (``meeple.envs.factory.batch_unit``).
    """

    name: str

    def make_env(self, env_cfg: Mapping[str, Any], *, num_envs: int, device: str = "cpu") -> EnvBase:
        ...


@runtime_checkable
class EnvSnapshots(Protocol):
    """Optional: a backend whose envs' simulator state can be saved and restored exactly.

    Checkpoints use it for exact resume: the collector's in-flight episodes continue
    where they stood. ``env`` is what the backend's ``make_env`` returned (not the core's
    transformed wrapper). The state must be built from tensors, Python scalars, strings,
    None, lists, tuples and dicts (checkpoints load with ``torch.load(weights_only=True)``).
    A backend without it still resumes, but its envs restart from fresh episodes.
    ``get_sim_state`` may raise :class:`SnapshotUnsupported` for envs it cannot capture.
    """

    def get_sim_state(self, env: EnvBase) -> dict[str, Any]:
        ...

    def set_sim_state(self, env: EnvBase, state: dict[str, Any]) -> None:
        ...


class SnapshotUnsupported(NotImplementedError):
    """This env's simulator state cannot be captured exactly (resume restarts its episodes)."""
