"""The same work as the independent topology, in one process and one loop (benchmark baseline).

Each turn: one env step for all agents (the actor's code), transitions into each agent's own
(plain, in-process) buffer, then each agent's learner catches up to the same update budget the
learner processes follow (``updates_per_step`` per env step after ``learning_starts``). The
actor's policies use the learners' models directly, so there is no publish or sync.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from hydra.utils import instantiate
from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer

from meeple.envs.pettingzoo import AgentSpec
from meeple.phases.dqn.actor import MultiAgentActor
from meeple.phases.dqn.dqn import DQNUpdate
from meeple.phases.dqn.schema import DQNPhase
from meeple.seeding import seed_process


@dataclass
class SequentialResult:
    env_steps: int = 0
    updates: list[int] = field(default_factory=list)
    wall_s: float = 0.0
    act_s: float = 0.0
    learn_s: float = 0.0
    returns: dict[str, list[tuple[int, float]]] = field(default_factory=dict)


def run_sequential(
    phase: DQNPhase,
    env_cfg: dict,
    agents: list[AgentSpec],
    optimizer: dict,
    *,
    seed: int,
    dqn: dict,
    max_seconds: float | None = None,
) -> tuple[SequentialResult, MultiAgentActor]:
    """Train all agents in this process; returns the result and the actor (its models are the agents)."""
    seed_process(seed)
    ex, tu = phase.exploration, phase.target_update
    actor = MultiAgentActor(
        env_cfg,
        agents,
        dqn,
        dict(eps_init=ex.eps_init, eps_end=ex.eps_end, annealing_steps=ex.annealing_steps),
        seed=seed,
    )
    buffers = [
        TensorDictReplayBuffer(
            storage=LazyTensorStorage(phase.buffer_size), batch_size=phase.batch_size
        )
        for _ in agents
    ]
    updates = [
        DQNUpdate(
            model,
            instantiate(dict(optimizer)),
            target_update=tu.kind,
            tau=tu.tau,
            hard_interval=tu.hard_interval,
            max_grad_norm=phase.max_grad_norm,
        )
        for model in actor.models
    ]
    result = SequentialResult(returns={a.name: [] for a in agents})
    pending: list[list] = [[] for _ in agents]
    t0 = time.perf_counter()
    while actor.steps < phase.total_env_steps:
        if max_seconds is not None and time.perf_counter() - t0 > max_seconds:
            break
        t = time.perf_counter()
        transitions, finished = actor.step()
        for chunk, tr in zip(pending, transitions):
            chunk.append(tr)
        if actor.steps % phase.write_interval == 0:
            for buffer, chunk in zip(buffers, pending):
                buffer.extend(torch.cat(chunk))
                chunk.clear()
        if finished is not None:
            for name, ret in finished.items():
                result.returns[name].append((actor.steps, ret))
        t1 = time.perf_counter()
        result.act_s += t1 - t
        if actor.steps >= phase.learning_starts:
            budget = int((actor.steps - phase.learning_starts) * phase.updates_per_step)
            for buffer, update in zip(buffers, updates):
                while update.updates < budget and len(buffer) >= phase.batch_size:
                    update.step(buffer.sample())
        result.learn_s += time.perf_counter() - t1
    result.wall_s = time.perf_counter() - t0
    result.env_steps = actor.steps
    result.updates = [u.updates for u in updates]
    return result, actor
