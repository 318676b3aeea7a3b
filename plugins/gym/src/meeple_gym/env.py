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
import numpy as np
import torch
from gymnasium.wrappers import OrderEnforcing, PassiveEnvChecker, TimeLimit
from torchrl.envs import EnvBase, GymWrapper

from meeple.errors import ConfigError
from meeple.plugins.spec import SnapshotUnsupported

# Simulator state of Gymnasium's classic-control envs (CartPole, Acrobot, MountainCar, ...):
# the attributes step() reads and reset() writes. Other envs expose no state API.
_SIM_MODULE = "gymnasium.envs.classic_control."
_SIM_ATTRIBUTES = ("state", "steps_beyond_terminated", "last_u")
# Wrappers gym.make adds; only TimeLimit and OrderEnforcing carry state that matters.
_KNOWN_WRAPPERS = (TimeLimit, OrderEnforcing, PassiveEnvChecker)


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

    # -- optional snapshot protocol (meeple.plugins.spec.EnvSnapshots) ---------------------
    def get_sim_state(self, env: EnvBase) -> dict[str, Any]:
        """Each sub-env's simulator state, step counters and random generator (exact)."""
        vector = env._env
        return {
            "envs": [_capture(sub) for sub in vector.envs],
            "autoreset_envs": torch.as_tensor(np.array(vector._autoreset_envs, copy=True)),
        }

    def set_sim_state(self, env: EnvBase, state: dict[str, Any]) -> None:
        vector = env._env
        if len(state["envs"]) != len(vector.envs):
            raise ValueError(f"snapshot holds {len(state['envs'])} envs, this batch has {len(vector.envs)}")
        for sub, sub_state in zip(vector.envs, state["envs"]):
            _restore(sub, sub_state)
        vector._autoreset_envs = state["autoreset_envs"].numpy().copy()


def _layers(env: gym.Env) -> tuple[list[gym.Wrapper], gym.Env]:
    wrappers = []
    while isinstance(env, gym.Wrapper):
        wrappers.append(env)
        env = env.env
    return wrappers, env


def _capture(env: gym.Env) -> dict[str, Any]:
    wrappers, base = _layers(env)
    name = type(base).__name__
    if not type(base).__module__.startswith(_SIM_MODULE):
        raise SnapshotUnsupported(f"{name}: Gymnasium exposes no simulator state for it")
    for wrapper in wrappers:
        if not isinstance(wrapper, _KNOWN_WRAPPERS):
            raise SnapshotUnsupported(f"{name}: wrapper {type(wrapper).__name__} may hold state")
    state: dict[str, Any] = {"attributes": {}}
    for attr in _SIM_ATTRIBUTES:
        if hasattr(base, attr):
            state["attributes"][attr] = _storable(getattr(base, attr), f"{name}.{attr}")
    rng = base._np_random
    state["np_random"] = None if rng is None else rng.bit_generator.state
    state["np_random_seed"] = base._np_random_seed
    for wrapper in wrappers:
        if isinstance(wrapper, TimeLimit):
            state["elapsed_steps"] = wrapper._elapsed_steps
        elif isinstance(wrapper, OrderEnforcing):
            state["has_reset"] = wrapper._has_reset
    return state


def _restore(env: gym.Env, state: dict[str, Any]) -> None:
    wrappers, base = _layers(env)
    for attr, value in state["attributes"].items():
        setattr(base, attr, value.numpy().copy() if isinstance(value, torch.Tensor) else value)
    if state["np_random"] is None:
        base._np_random = None
    else:
        bit_generator = getattr(np.random, state["np_random"]["bit_generator"])()
        bit_generator.state = state["np_random"]
        base._np_random = np.random.Generator(bit_generator)
    base._np_random_seed = state["np_random_seed"]
    for wrapper in wrappers:
        if isinstance(wrapper, TimeLimit) and "elapsed_steps" in state:
            wrapper._elapsed_steps = state["elapsed_steps"]
        elif isinstance(wrapper, OrderEnforcing) and "has_reset" in state:
            wrapper._has_reset = state["has_reset"]


def _storable(value: Any, where: str) -> Any:
    """Tensors and Python scalars only (checkpoints load with weights_only=True)."""
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value.copy())
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, bool | int | float):
        return value
    raise SnapshotUnsupported(f"{where} is a {type(value).__name__}; only arrays and numbers are captured")
