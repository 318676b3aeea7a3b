"""Acting for every agent in one env: epsilon-greedy on local models, per-agent transitions.

:class:`MultiAgentActor` is the loop body shared by the actor process
(:func:`run_actor`) and the single-process sequential baseline of the benchmark.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from torch import nn
from torchrl.envs.utils import ExplorationType, set_exploration_type

from meeple.envs.pettingzoo import AgentSpec, make_pettingzoo_env
from meeple.phases.dqn.dqn import DQNSpec, make_dqn_model, make_exploration
from meeple.phases.dqn.shared import SharedModel
from meeple.phases.dqn.state import Report, SharedRunState, update_budget
from meeple.seeding import seed_process


def agent_transitions(td: TensorDictBase, agent: str) -> TensorDict:
    """``agent``'s transitions of one env step (batch ``[1]``), as flat DQN keys."""
    nxt = td["next", agent]
    return TensorDict(
        observation=td[agent, "observation"],
        action=td[agent, "action"],
        next=TensorDict(
            observation=nxt["observation"],
            reward=nxt["reward"],
            done=nxt["done"],
            terminated=nxt["terminated"],
            batch_size=td[agent].batch_size,
        ),
        batch_size=td[agent].batch_size,
    )


class MultiAgentActor:
    """Steps one multi-agent env with one local model (and epsilon schedule) per agent."""

    def __init__(
        self,
        env_cfg: Mapping[str, Any],
        agents: Sequence[AgentSpec],
        dqn: Mapping[str, Any],
        exploration: Mapping[str, Any],
        *,
        seed: int,
    ) -> None:
        self.env = make_pettingzoo_env(env_cfg, seed=seed)
        self.agents = [a.name for a in agents]
        self.models = [make_dqn_model(DQNSpec(a.obs_dim, a.num_actions, **dqn)) for a in agents]
        policies = [
            make_exploration(m, a.num_actions, **exploration) for m, a in zip(self.models, agents)
        ]
        self.policies = [p for p, _ in policies]
        self.egreedy = [e for _, e in policies]
        self.td = self.env.reset()
        self.episode_return = torch.zeros(len(agents))
        self.steps = 0

    @torch.no_grad()
    def step(self) -> tuple[list[TensorDict], dict[str, float] | None]:
        """One env step: (per-agent transitions, per-agent episode returns if an episode ended)."""
        with set_exploration_type(ExplorationType.RANDOM):
            for policy, egreedy, agent in zip(self.policies, self.egreedy, self.agents):
                policy(self.td[agent])  # writes td[agent]["action"]
                egreedy.step()
        td, self.td = self.env.step_and_maybe_reset(self.td)
        self.steps += 1
        out = [agent_transitions(td, agent) for agent in self.agents]
        self.episode_return += torch.stack([t["next", "reward"].sum() for t in out])
        finished = None
        if bool(td["next", "done"].any()):
            finished = dict(zip(self.agents, self.episode_return.tolist()))
            self.episode_return.zero_()
        return out, finished

    @property
    def epsilon(self) -> float:
        return float(self.egreedy[0].eps)

    def close(self) -> None:
        self.env.close()


def sync_local_copies(
    shared: Sequence[SharedModel], local: Sequence[nn.Module], versions: list[int]
) -> int:
    """Refresh each local copy whose shared model has a newer version; returns how many were copied."""
    copied = 0
    for i, (source, target) in enumerate(zip(shared, local)):
        if source.version != versions[i]:
            versions[i] = source.read_into(target)
            copied += 1
    return copied


def run_actor(
    state: SharedRunState,
    *,
    env_cfg: Mapping[str, Any],
    agents: Sequence[AgentSpec],
    dqn: Mapping[str, Any],
    exploration: Mapping[str, Any],
    seed: int,
    total_steps: int,
    sync_interval: int,
    write_interval: int,
    report_interval: int,
    learning_starts: int,
    updates_per_step: float,
    max_update_lag: int | None,
) -> None:
    """The actor process: act for all agents, fill each agent's own buffer, sync local copies.

    After each write it waits until every learner has done the updates the pacing allows for
    ``max_update_lag`` env steps earlier (``None``: never waits). At 0 acting and learning take
    turns, so what the actor plays and what the learners sample do not depend on CPU shares:
    the run is bit-reproducible from its seed.
    """
    seed_process(seed)  # epsilon-greedy draws from torch's global generator
    actor = MultiAgentActor(env_cfg, agents, dqn, exploration, seed=seed)
    versions = [shared.read_into(local) for shared, local in zip(state.models, actor.models)]
    pending: list[list[TensorDict]] = [[] for _ in agents]
    syncs, waited_s = 0, 0.0
    state.report(Report.READY, "actor", {})

    def flush() -> None:
        for buffer, chunk in zip(state.buffers, pending):
            if chunk:
                buffer.extend(
                    torch.cat(chunk)
                )  # this agent's transitions only, into its own buffer
                chunk.clear()

    try:
        while actor.steps < total_steps and not state.should_stop():
            transitions, finished = actor.step()
            for chunk, transition in zip(pending, transitions):
                chunk.append(transition)
            if actor.steps % write_interval == 0:
                flush()
                state.set_env_steps(actor.steps)
                if max_update_lag is not None:
                    waited_s += state.wait_for_updates(
                        update_budget(
                            actor.steps - max_update_lag, learning_starts, updates_per_step
                        )
                    )
            if actor.steps % sync_interval == 0:
                syncs += sync_local_copies(state.models, actor.models, versions)
            if finished is not None:
                state.report(
                    Report.EPISODE, "actor", {"env_steps": actor.steps, "returns": finished}
                )
            if actor.steps % report_interval == 0:
                state.report(
                    Report.ACTOR,
                    "actor",
                    {
                        "env_steps": actor.steps,
                        "epsilon": actor.epsilon,
                        "syncs": syncs,
                        "versions": list(versions),
                        "waited_s": waited_s,
                    },
                )
        flush()
        state.set_env_steps(actor.steps)
        if actor.steps >= total_steps:
            state.report(Report.FINISHED, "actor", {"env_steps": actor.steps})
    finally:
        actor.close()
