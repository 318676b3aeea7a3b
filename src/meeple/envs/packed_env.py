"""The backend contract for device-resident batched envs that render packed frames.

A backend that keeps its state on the device (a GPU emulator, a Warp simulator)
implements :class:`PackedEnv` and is named in ``env.factory`` (a ``_target_`` node);
meeple's packed PPO pipeline (:mod:`meeple.phases.packed_ppo.data`) then drives it
without copies or host synchronisation:

- ``step`` reads this step's actions from the rollout's action storage by offset and
  writes rewards and dones into the rollout's storages by the same offset;
- ``render_packed_into`` writes the next observation straight into the rollout's
  observation storage at a byte offset (no intermediate frame buffer, no ``copy_``).

Every storage is a contiguous tensor on the env's device that the caller owns and
reuses for the whole run, so a backend may build its own view of it (a Warp array,
a CUDA pointer) once and keep it (:class:`ViewCache`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import torch

from meeple.envs.packed import FRAME_BYTES


@runtime_checkable
class PackedEnv(Protocol):
    """``num_envs`` envs stepped together; observations are ``frames_per_obs`` packed frames each."""

    num_envs: int
    frames_per_obs: int
    num_actions: int
    device: torch.device

    # Optional: ``last_success`` (N,) bool, envs whose episode ended in success at the last
    # step (greedy evaluation reports a success rate when the backend has it).

    def reset(self, seed: int) -> None:
        """Start fresh episodes in every env, reproducibly from ``seed``."""

    def step(
        self, actions: torch.Tensor, rewards: torch.Tensor, dones: torch.Tensor, offset: int
    ) -> None:
        """Apply ``actions.view(-1)[offset:offset + num_envs]`` (int64); write this step's
        rewards (float32) and dones (bool) at the same offset of ``rewards`` / ``dones``.
        Envs that finish start a new episode at once (the next render shows it)."""

    def render_packed_into(self, out: torch.Tensor, base_offset: int) -> None:
        """Write the current observation, ``num_envs * frames_per_obs`` packed frames in
        ``(env, frame, 72, 20)`` order, into ``out.view(-1)[base_offset:]`` (uint8)."""

    def episode_stats(self) -> dict[str, torch.Tensor]:
        """Device tensors summed over the episodes finished since the last call
        (``episodes``, ``successes``, ``return_sum``, ``length_sum``); resets them."""


def resolve_device(device: str | torch.device) -> torch.device:
    """``cuda`` -> ``cuda:<current>`` so device comparisons hold."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device


def obs_bytes(env: PackedEnv) -> int:
    """Bytes one ``render_packed_into`` writes."""
    return env.num_envs * env.frames_per_obs * FRAME_BYTES


def check_storage(
    name: str, tensor: torch.Tensor, dtype: torch.dtype, device: torch.device, numel: int
) -> None:
    """A storage passed to a backend: contiguous, right dtype and device, large enough."""
    problems = []
    if tensor.dtype != dtype:
        problems.append(f"dtype {tensor.dtype} (need {dtype})")
    if tensor.device != device:
        problems.append(f"device {tensor.device} (need {device})")
    if not tensor.is_contiguous():
        problems.append("not contiguous (need a contiguous storage)")
    if tensor.numel() < numel:
        problems.append(f"{tensor.numel()} elements (need at least {numel})")
    if problems:
        raise ValueError(f"{name}: " + "; ".join(problems))


class ViewCache:
    """One backend view per caller storage, built on first use and then reused.

    Keyed by the storage's address, size and dtype; holds the tensor so the address
    stays valid. Rollout storages live for the whole run, so this stays small.
    """

    def __init__(self, make: Callable[[torch.Tensor], Any], capacity: int = 32) -> None:
        self.make = make
        self.capacity = capacity
        self._views: dict[tuple, tuple[torch.Tensor, Any]] = {}

    def __call__(self, tensor: torch.Tensor) -> Any:
        key = (tensor.data_ptr(), tensor.numel(), tensor.dtype, str(tensor.device))
        hit = self._views.get(key)
        if hit is None:
            if len(self._views) >= self.capacity:
                self._views.pop(next(iter(self._views)))
            hit = self._views[key] = (tensor, self.make(tensor.view(-1)))
        return hit[1]

    def __len__(self) -> int:
        return len(self._views)
