"""Any Gymnasium env id as one batched TorchRL env.

Gymnasium's ``SyncVectorEnv`` steps ``num_envs`` copies in one call, and
TorchRL's ``GymWrapper`` turns that into one TensorDict per step: the
collector's per-step overhead is paid once per batch, not per env. (TorchRL's
``GymEnv(num_envs=...)`` always uses ``AsyncVectorEnv`` — one process per env —
which costs more than it saves for cheap envs.) Autoreset is DISABLED so TorchRL
resets finished envs itself (partial resets) and episode boundaries stay exact.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
from torchrl.envs import EnvBase, GymWrapper

from meeple.errors import ConfigError


class GymBackend:
    name = "gym"

    def make_env(self, env_cfg: Mapping[str, Any], *, num_envs: int, device: str = "cpu") -> EnvBase:
        env_id = env_cfg.get("id")
        if not env_id or env_id == "???":
            raise ConfigError("env.id is required for the gym backend, e.g. env.id=CartPole-v1")
        kwargs = dict(env_cfg.get("kwargs") or {})
        try:
            vector = gym.make_vec(
                env_id,
                num_envs=num_envs,
                vectorization_mode="sync",
                vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.DISABLED},
                **kwargs,
            )
        except gym.error.Error as err:
            raise ConfigError(
                f"env.id={env_id!r} could not be made by Gymnasium ({err}); "
                "accepted: any id in gymnasium.registry, e.g. CartPole-v1, Acrobot-v1"
            ) from err
        if not isinstance(vector.single_action_space, gym.spaces.Discrete):
            raise ConfigError(
                f"env.id={env_id!r} has action space {vector.single_action_space}; "
                "the gym backend accepts Discrete action spaces"
            )
        return GymWrapper(vector, categorical_action_encoding=True, device=device)
