"""PackedRolloutBuffer: one on-policy rollout of packed frames, preallocated on the device.

Observations are ``(T+1, N, K, 72, 20)`` uint8: the env renders step ``t``'s observation
straight into slot ``t`` and the extra slot ``T`` holds the bootstrap observation. Per-step
values are ``(T, N)``. The buffer is written in place every rollout (nothing is
reallocated), which is what lets a backend keep one view of each storage for the run.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from meeple.envs.packed import FRAME_BYTES, FRAME_SHAPE

# Per-step storages flattened into minibatch samples.
SAMPLE_KEYS = ("actions", "logprobs", "prox_logprobs", "values", "advantages", "returns")


class PackedRolloutBuffer:
    def __init__(
        self, steps: int, num_envs: int, frames_per_obs: int, device: str | torch.device = "cpu"
    ) -> None:
        for name, value in (
            ("steps", steps),
            ("num_envs", num_envs),
            ("frames_per_obs", frames_per_obs),
        ):
            if value < 1:
                raise ValueError(f"PackedRolloutBuffer {name}={value}: accepted: an integer >= 1")
        self.steps, self.num_envs, self.frames_per_obs = steps, num_envs, frames_per_obs
        self.device = torch.device(device)
        step = (steps, num_envs)
        kw = dict(device=self.device)
        self.obs = torch.zeros(
            (steps + 1, num_envs, frames_per_obs, *FRAME_SHAPE), dtype=torch.uint8, **kw
        )
        self.actions = torch.zeros(step, dtype=torch.int64, **kw)
        self.rewards = torch.zeros(step, dtype=torch.float32, **kw)
        self.dones = torch.zeros(step, dtype=torch.bool, **kw)
        self.values = torch.zeros(step, dtype=torch.float32, **kw)
        self.logprobs = torch.zeros(step, dtype=torch.float32, **kw)  # behaviour policy mu
        self.prox_logprobs = torch.zeros(
            step, dtype=torch.float32, **kw
        )  # proximal policy (learner, update start)
        self.advantages = torch.zeros(step, dtype=torch.float32, **kw)
        self.returns = torch.zeros(step, dtype=torch.float32, **kw)
        self.bootstrap_value = torch.zeros(num_envs, dtype=torch.float32, **kw)
        self.policy_version = (
            -1
        )  # learner updates the behaviour policy had seen; stamped per rollout
        self.stats: dict[
            str, torch.Tensor
        ] = {}  # device sums from the env, reduced once per rollout
        self.ready = None  # CUDA event recorded when an actor stream finished writing (async mode)

    @property
    def samples(self) -> int:
        return self.steps * self.num_envs

    def obs_offset(self, t: int) -> int:
        """Byte offset of observation slot ``t`` in ``obs.view(-1)`` (where the env renders it)."""
        return t * self.num_envs * self.frames_per_obs * FRAME_BYTES

    def nbytes(self) -> int:
        tensors = (
            self.obs,
            self.actions,
            self.rewards,
            self.dones,
            self.values,
            self.logprobs,
            self.prox_logprobs,
            self.advantages,
            self.returns,
            self.bootstrap_value,
        )
        return sum(t.numel() * t.element_size() for t in tensors)

    @torch.no_grad()
    def compute_gae(self, gamma: float, gae_lambda: float) -> None:
        """A_t = delta_t + gamma*lambda*(1-d_t)*A_{t+1}, delta_t = r_t + gamma*(1-d_t)*V_{t+1} - V_t.

        Done steps (success or time limit) do not bootstrap. Device ops only.
        """
        not_done = (~self.dones).float()
        next_value, carry = self.bootstrap_value, torch.zeros_like(self.bootstrap_value)
        for t in reversed(range(self.steps)):
            delta = self.rewards[t] + gamma * not_done[t] * next_value - self.values[t]
            carry = delta + gamma * gae_lambda * not_done[t] * carry
            self.advantages[t] = carry
            next_value = self.values[t]
        torch.add(self.advantages, self.values, out=self.returns)

    def minibatches(
        self, minibatch_size: int, epochs: int, generator: torch.Generator
    ) -> Iterator[dict]:
        """``epochs`` shuffled passes over the ``T*N`` samples, ``minibatch_size`` at a time
        (a tail smaller than a minibatch is dropped). Indices are drawn on the device."""
        if not 1 <= minibatch_size <= self.samples:
            raise ValueError(f"minibatch_size={minibatch_size}: accepted: 1..{self.samples} (T*N)")
        obs = self.obs[: self.steps].reshape(self.samples, self.frames_per_obs, *FRAME_SHAPE)
        flat = {key: getattr(self, key).reshape(-1) for key in SAMPLE_KEYS}
        count = self.samples // minibatch_size
        for _ in range(epochs):
            order = torch.randperm(self.samples, generator=generator, device=self.device)
            for i in range(count):
                index = order[i * minibatch_size : (i + 1) * minibatch_size]
                batch = {key: value[index] for key, value in flat.items()}
                batch["obs"] = obs[index]
                yield batch


def bytes_per_obs(frames_per_obs: int) -> int:
    return frames_per_obs * FRAME_BYTES
