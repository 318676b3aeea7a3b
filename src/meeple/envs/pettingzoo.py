"""Multi-agent envs from PettingZoo, through TorchRL's ``PettingZooWrapper``.

The env family is named in config by ``_target_`` (for example
``mpe2.simple_spread_v3.parallel_env``), so the core imports no env family. Each agent gets
its own TensorDict group (``MarlGroupMapType.ONE_GROUP_PER_AGENT``): ``td[agent]`` holds that
agent's observation and action, ``td["next", agent]`` its reward and done flags.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hydra.utils import instantiate

from meeple.errors import ConfigError

BACKEND = "pettingzoo"  # env.backend of these envs: phase=dqn's, not an installed backend


@dataclass(frozen=True)
class AgentSpec:
    """What an independent learner must know about its agent."""

    name: str
    obs_dim: int
    num_actions: int


def make_pettingzoo_env(env_cfg: Mapping[str, Any], *, seed: int):
    """A seeded TorchRL env around the PettingZoo *parallel* env built from ``env_cfg['factory']``."""
    from torchrl.envs.libs.pettingzoo import PettingZooWrapper
    from torchrl.envs.utils import MarlGroupMapType

    if "factory" not in env_cfg:
        raise ConfigError(
            "env.factory is missing: a PettingZoo env needs `factory: {_target_: <module>.parallel_env, ...}`"
        )
    try:
        raw = instantiate(dict(env_cfg["factory"]))
    except Exception as err:  # an unknown module or argument: say which config node
        raise ConfigError(f"env.factory could not build the PettingZoo env: {err}") from err
    if callable(raw) and not hasattr(raw, "possible_agents"):
        raw = raw()  # a `_partial_: true` factory
    if (
        not hasattr(raw, "possible_agents")
        or not hasattr(raw, "step")
        or hasattr(raw, "agent_selection")
    ):
        raise ConfigError(
            f"env.factory built {type(raw).__name__}; accepted: a PettingZoo ParallelEnv (use `<env>.parallel_env`)"
        )
    with warnings.catch_warnings():
        # TorchRL warns for any PettingZoo other than the one its CI pins; we test ours here.
        warnings.filterwarnings("ignore", message="PettingZoo in TorchRL is tested using version")
        return PettingZooWrapper(
            raw,
            group_map=MarlGroupMapType.ONE_GROUP_PER_AGENT,
            categorical_actions=True,
            use_mask=False,
            seed=seed,
        )


def agent_specs(env) -> list[AgentSpec]:
    """One :class:`AgentSpec` per agent of a wrapped env, in the env's agent order.

    Independent DQN needs a flat vector observation and a discrete action space per agent.
    """
    specs = []
    for group, agents in env.group_map.items():
        if len(agents) != 1:
            raise ConfigError(
                f"group {group!r} holds {len(agents)} agents; independent learners need one per group"
            )
        obs = env.observation_spec[group, "observation"]
        act = env.full_action_spec[group, "action"]
        if len(obs.shape) != 2:
            raise ConfigError(
                f"agent {group!r} observes shape {tuple(obs.shape[1:])}; accepted: a flat vector (MLP Q-network)"
            )
        n = getattr(act, "n", None)
        if n is None:
            raise ConfigError(
                f"agent {group!r} has a non-discrete action space; accepted: Discrete (DQN)"
            )
        specs.append(AgentSpec(name=group, obs_dim=int(obs.shape[-1]), num_actions=int(n)))
    return specs
