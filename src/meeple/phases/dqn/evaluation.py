"""Greedy evaluation of independent agents (or of a uniformly random policy) in their env."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn
from torchrl.envs.utils import ExplorationType, set_exploration_type

from meeple.envs.pettingzoo import AgentSpec, make_pettingzoo_env


@torch.no_grad()
def evaluate(
    env_cfg: Mapping[str, Any],
    agents: Sequence[AgentSpec],
    models: Sequence[nn.Module] | None,
    *,
    episodes: int,
    seed: int,
) -> dict[str, float]:
    """Mean undiscounted return per agent over ``episodes`` episodes.

    ``models``: one DQN model per agent, acting greedily (argmax Q); ``None``: uniform random
    actions. The env is built from ``seed``, so two calls with the same seed see the same
    sequence of start states.
    """
    env = make_pettingzoo_env(env_cfg, seed=seed)
    rng = torch.Generator().manual_seed(seed)
    totals = torch.zeros(len(agents))
    try:
        td = env.reset()
        done = 0
        with set_exploration_type(ExplorationType.DETERMINISTIC):
            while done < episodes:
                for i, agent in enumerate(agents):
                    if models is None:
                        td[agent.name, "action"] = torch.randint(
                            agent.num_actions, (1,), generator=rng
                        )
                    else:
                        models[i].value_network(td[agent.name])
                step, td = env.step_and_maybe_reset(td)
                totals += torch.stack([step["next", a.name, "reward"].sum() for a in agents])
                done += int(step["next", "done"].any())
    finally:
        env.close()
    return {a.name: float(t) / episodes for a, t in zip(agents, totals)}
