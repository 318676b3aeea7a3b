"""Worker targets the tests spawn (importable by module name from a spawned process)."""

from __future__ import annotations

import time

import torch

from meeple.phases.dqn.learner import Learner, run_learner
from meeple.phases.dqn.shared import SharedModel
from meeple.phases.dqn.state import Report


def crashing_learner(state, **kwargs) -> None:
    """A learner that fails once the actor is under way (agent index 1 only; the others train)."""
    if kwargs["index"] != 1:
        return run_learner(state, **kwargs)
    while state.env_steps < 50 and not state.should_stop():
        time.sleep(0.01)
    raise RuntimeError("injected learner failure for the crash test")


def slow_learner(state, **kwargs) -> None:
    """A learner that takes 10 ms more per update than it needs (a starved CPU share)."""
    train_step = Learner.train_step

    def slow_step(self, batch_size):
        time.sleep(0.01)
        return train_step(self, batch_size)

    Learner.train_step = slow_step  # this spawned process only
    return run_learner(state, **kwargs)


def fill(model: torch.nn.Module, value: float) -> None:
    with torch.no_grad():
        for tensor in model.state_dict().values():
            tensor.fill_(value)


def publisher(shared: SharedModel, make_model, publishes: int, delay_s: float) -> None:
    """A learner stand-in: publish version v as a model whose every entry equals v, slowly."""
    shared.publish_delay_s = delay_s
    model = make_model()
    for version in range(1, publishes + 1):
        fill(model, float(version))
        assert shared.publish(model) == version


def naive_publisher(target: torch.nn.Module, make_model, publishes: int, delay_s: float) -> None:
    """The unsafe way (the negative control): copy tensor by tensor into the one shared model."""
    model = make_model()
    for version in range(1, publishes + 1):
        fill(model, float(version))
        with torch.no_grad():
            for name, value in model.state_dict().items():
                target.state_dict()[name].copy_(value)
                time.sleep(delay_s)


def finishing_actor(state, **kwargs) -> None:
    """An actor stand-in that reaches its budget at once: report FINISHED and exit."""
    state.report(Report.FINISHED, "actor", {"env_steps": 0})


def idle_learner(state, **kwargs) -> None:
    """A learner stand-in with no updates to do: wait for the stop request."""
    while not state.should_stop():
        time.sleep(0.01)
