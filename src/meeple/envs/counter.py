"""A deterministic array env for transport tests and benchmarks (it costs almost nothing, so
timings show the transport). Serve it with ``env.array_env=meeple.envs.counter:CounterEnv``.

Env ``i`` seeded with ``s`` starts its counter at ``s + i``. Observation: ``[t, last action,
start, 0...]``; reward: the action taken; an episode ends after ``episode_length`` steps
(``truncate=True``: as a time limit). Action ``t % num_actions`` is illegal (masks matter);
``fail_action`` makes the env raise (server fault tests).
"""

from __future__ import annotations

import numpy as np

from meeple.envs.spaces import Spaces


class CounterEnv:
    def __init__(
        self,
        num_envs: int,
        obs_size: int = 4,
        num_actions: int = 4,
        episode_length: int = 5,
        truncate: bool = False,
        fail_action: int | None = None,
    ) -> None:
        self.spaces = Spaces(
            num_envs,
            num_actions,
            (max(obs_size, 3),),
            np.float32,
            info=(("t", np.int32),),
            env_name="counter",
        )
        self.episode_length, self.truncate, self.fail_action = episode_length, truncate, fail_action
        self.start = np.zeros(num_envs, dtype=np.int64)
        self.t = np.zeros(num_envs, dtype=np.int64)
        self.last = np.zeros(num_envs, dtype=np.int64)
        self._rows = np.arange(num_envs)

    def reset(self, seed: int | None, out: np.ndarray) -> None:
        if seed is not None:
            self.start = seed + self._rows
        self.t[:] = 0
        self.last[:] = 0
        out["reward"], out["done"], out["truncated"] = 0, 0, 0
        self.observe(out)

    def step(self, actions: np.ndarray, out: np.ndarray) -> None:
        if self.fail_action is not None and (actions == self.fail_action).any():
            raise RuntimeError(f"action {self.fail_action} is configured to fail")
        self.t += 1
        self.last[:] = actions
        done = self.t >= self.episode_length
        out["reward"] = actions
        out["done"] = done
        out["truncated"] = done & self.truncate
        if done.any():
            self.t[done] = 0
            self.start[done] += 1000  # a new episode, visibly different
        self.observe(out, keep_step=True)

    def observe(self, out: np.ndarray, keep_step: bool = False) -> None:
        """Write every field (array envs may be handed fresh buffers each call)."""
        if not keep_step:
            out["reward"], out["done"], out["truncated"] = 0, 0, 0
        obs = out["obs"]
        obs[:, 0], obs[:, 1], obs[:, 2] = self.t, self.last, self.start
        mask = out["mask"]
        mask[...] = 1
        mask[self._rows, self.t % self.spaces.num_actions] = 0
        out["info_t"] = self.t

    def close(self) -> None:
        pass
