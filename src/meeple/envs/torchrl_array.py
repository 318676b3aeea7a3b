"""A TorchRL env hosted as an array env (:class:`~meeple.envs.array.ArrayEnv`) by a server:
what ``make_array_env`` builds for a backend without a native array env. The records' keys are
:class:`~meeple.envs.record_env.RecordEnv`'s, which reads them back on the client side."""

from __future__ import annotations

import numpy as np
import torch
from tensordict import TensorDictBase
from torchrl.envs import EnvBase

from meeple.envs.record_env import MASK_KEY, OBS_KEY
from meeple.envs.spaces import Spaces
from meeple.errors import ConfigError


class TorchRLArrayEnv:
    """Hosts any TorchRL env with a discrete action and an ``observation`` key.

    Finished envs are reset right after the step (partial reset with ``_reset``), so the
    records follow the auto-reset contract. An ``action_mask`` key, if the env has one,
    becomes the mask; otherwise every action is legal.
    """

    def __init__(self, env: EnvBase, name: str = "") -> None:
        self.env = env
        (num_envs,) = env.batch_size
        obs_spec = env.observation_spec[OBS_KEY]
        n = getattr(getattr(env.action_spec, "space", None), "n", None)
        if n is None:
            raise ConfigError(
                f"env {name!r} has a {type(env.action_spec).__name__} action; servers host discrete actions"
            )
        dtype = torch.empty((), dtype=obs_spec.dtype).numpy().dtype
        self.spaces = Spaces(num_envs, int(n), tuple(obs_spec.shape[1:]), dtype, env_name=name)
        self._has_mask = MASK_KEY in env.observation_spec.keys()
        self._td: TensorDictBase | None = None

    def _write_obs(
        self, td: TensorDictBase, out: np.ndarray, rows: np.ndarray | slice = slice(None)
    ) -> None:
        out["obs"][rows] = td[OBS_KEY][rows].numpy()
        out["mask"][rows] = td[MASK_KEY][rows].numpy() if self._has_mask else 1

    def reset(self, seed: int | None, out: np.ndarray) -> None:
        if seed is not None:
            self.env.set_seed(int(seed))
        self._td = self.env.reset()
        out["reward"], out["done"], out["truncated"] = 0, 0, 0
        self._write_obs(self._td, out)

    def step(self, actions: np.ndarray, out: np.ndarray) -> None:
        td = self._td.clone(False)
        td["action"] = torch.tensor(actions, dtype=torch.int64)  # a copy: actions may be read-only
        nxt = self.env.step(td)["next"]
        done = nxt["done"].reshape(-1)
        truncated = nxt.get("truncated", torch.zeros_like(done)).reshape(-1)
        out["reward"] = nxt["reward"].reshape(-1).numpy()
        out["done"], out["truncated"] = done.numpy(), truncated.numpy()
        state = nxt.exclude("reward", "done", "terminated", "truncated")
        if done.any():
            reset = state.clone(False)
            reset["_reset"] = done.unsqueeze(-1)
            state = self.env.reset(reset)
        self._td = state
        self._write_obs(state, out)

    def observe(self, out: np.ndarray) -> None:
        out["reward"], out["done"], out["truncated"] = 0, 0, 0
        self._write_obs(self._td, out)

    def close(self) -> None:
        self.env.close()
