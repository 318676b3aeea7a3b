"""Array-level envs: what an env server hosts.

An :class:`ArrayEnv` steps a batch of envs and writes step-result records
(:meth:`meeple.envs.spaces.Spaces.record_dtype`) into arrays it is handed, so a
server can point it straight at a reply buffer or at shared memory. Backends may provide
one natively (``make_array_env``: fast, and the server never imports torch); any other
backend's TorchRL env is hosted through :class:`meeple.envs.torchrl_array.TorchRLArrayEnv`.
This module imports numpy only (server start-up time).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np

from meeple.envs.spaces import Spaces
from meeple.errors import ConfigError


@runtime_checkable
class ArrayEnv(Protocol):
    """A batch of ``spaces.num_envs`` envs writing result records in place.

    ``out`` is a record array (one record per env, or ``[num_envs, num_seats]`` for
    ``step_multi``), possibly a strided view of shared memory; write every field of every
    record on each call (the buffer may be fresh or hold older results). ``step`` auto-resets
    finished envs (docs/protocol.md, "Auto-reset"). Actions are already validated
    against range and mask by the server.
    """

    spaces: Spaces

    def reset(self, seed: int | None, out: np.ndarray) -> None: ...

    def step(self, actions: np.ndarray, out: np.ndarray) -> None: ...

    def observe(self, out: np.ndarray) -> None: ...

    def close(self) -> None: ...


class LocalStepper:
    """An :class:`ArrayEnv` in this process, behind the
    :class:`~meeple.envs.record_env.RecordStepper` interface (what :class:`~meeple.envs.record_env.RecordEnv` drives)."""

    transient = False

    def __init__(self, env: ArrayEnv) -> None:
        self.env, self.spaces = env, env.spaces

    def reset(self, seed: int | None) -> np.ndarray:
        out = self.spaces.new_records(self.spaces.num_envs)
        self.env.reset(seed, out)
        return out

    def step(self, actions: np.ndarray) -> np.ndarray:
        out = self.spaces.new_records(self.spaces.num_envs)
        self.env.step(np.asarray(actions, dtype=np.int32), out)
        return out

    def close(self) -> None:
        self.env.close()


def make_array_env(env_cfg: Mapping[str, Any], num_envs: int) -> ArrayEnv:
    """The array env for ``env_cfg``: ``env.array_env`` ("module:callable"), the backend's own
    ``make_array_env``, or the backend's TorchRL env hosted by :class:`TorchRLArrayEnv`."""
    target = env_cfg.get("array_env")
    if target:
        module, _, name = str(target).partition(":")
        if not name:
            raise ConfigError(f"env.array_env={target!r}; expected 'package.module:callable'")
        try:
            factory = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as err:
            raise ConfigError(f"env.array_env={target!r} cannot be loaded: {err}") from err
        return factory(num_envs=num_envs, **dict(env_cfg.get("kwargs") or {}))
    from meeple.plugins.registry import load_backend

    backend = load_backend(env_cfg["backend"])
    native = getattr(backend, "make_array_env", None)
    if native is not None:
        return native(env_cfg, num_envs=num_envs)
    from meeple.envs.torchrl_array import TorchRLArrayEnv  # torch: only for TorchRL backends

    return TorchRLArrayEnv(
        backend.make_env(env_cfg, num_envs=num_envs), name=str(env_cfg["backend"])
    )
