"""One learner process per agent: DQN updates on a device copy, published to the shared model.

The learner samples only its own agent's buffer and writes only its own agent's shared model.
It paces itself on the global epoch (the actor's env steps): at most ``updates_per_step``
updates per env step once ``learning_starts`` steps are in, so a learner that gets more CPU
than the actor does not overfit a small buffer (and runs are comparable across machines).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import torch
from hydra.utils import instantiate

from meeple.envs.pettingzoo import AgentSpec
from meeple.phases.dqn.dqn import DQNSpec, DQNUpdate, make_dqn_model
from meeple.phases.dqn.state import IDLE_S, Report, SharedRunState, update_budget
from meeple.seeding import seed_process


def pick_device(name: str) -> torch.device:
    """``auto``: CUDA, then MPS, then CPU; else the named device."""
    if name != "auto":
        return torch.device(name)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


class Learner:
    """An agent's DQN on a device copy of its shared model."""

    def __init__(
        self,
        state: SharedRunState,
        index: int,
        agent: AgentSpec,
        *,
        dqn: Mapping[str, Any],
        optimizer: Mapping[str, Any],
        update: Mapping[str, Any],
        device: str,
    ) -> None:
        self.state, self.index, self.agent = state, index, agent
        self.shared = state.models[index]
        self.buffer = state.buffers[index]
        self.device = pick_device(device)
        self.model = make_dqn_model(DQNSpec(agent.obs_dim, agent.num_actions, **dqn)).to(
            self.device
        )
        self.update = DQNUpdate(self.model, instantiate(dict(optimizer)), **update)
        self.load_from_shared()

    def load_from_shared(self) -> int:
        """Take the shared model's newest snapshot; a fresh optimiser goes with new weights."""
        version = self.shared.read_into(self.model)
        self.update.reset_optimizer()
        return version

    def publish(self) -> int:
        return self.shared.publish(self.model)

    def train_step(self, batch_size: int) -> dict[str, float]:
        batch = self.buffer.sample(batch_size).to(self.device)
        return self.update.step(batch)


def run_learner(
    state: SharedRunState,
    *,
    index: int,
    agent: AgentSpec,
    dqn: Mapping[str, Any],
    optimizer: Mapping[str, Any],
    update: Mapping[str, Any],
    device: str,
    seed: int,
    batch_size: int,
    learning_starts: int,
    updates_per_step: float,
    publish_interval: int,
    report_interval: int,
) -> None:
    """The learner process of agent ``index``: train until the stop flag, then publish once more."""
    seed_process(seed)
    learner = Learner(
        state, index, agent, dqn=dqn, optimizer=optimizer, update=update, device=device
    )
    name = f"learner[{agent.name}]"
    losses: list[float] = []
    t0, done0 = time.perf_counter(), 0
    state.report(Report.READY, name, {})
    while not state.should_stop():
        steps = state.env_steps
        budget = update_budget(steps, learning_starts, updates_per_step)
        if learner.update.updates >= budget or len(learner.buffer) < batch_size:
            time.sleep(IDLE_S)
            continue
        losses.append(learner.train_step(batch_size)["loss"])
        n = learner.update.updates
        if n % publish_interval == 0:
            learner.publish()
        # counted only once published: an actor that waits for n updates then syncs must find
        # the weights of update n (a multiple of publish_interval), not the previous version
        state.updates[index] = n
        if n % report_interval == 0:
            now = time.perf_counter()
            state.report(
                Report.LEARNER,
                name,
                {
                    "agent": agent.name,
                    "updates": n,
                    "loss": sum(losses) / len(losses),
                    "updates_per_s": (n - done0) / max(now - t0, 1e-9),
                    "version": learner.shared.version,
                    "env_steps": steps,
                },
            )
            losses.clear()
            t0, done0 = now, n
    if learner.update.updates:
        learner.publish()  # the final weights are what evaluation reads
