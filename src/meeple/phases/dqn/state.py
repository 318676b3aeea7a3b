"""The run-wide shared state handed to every process of the independent topology."""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from torchrl.data import TensorDictReplayBuffer

from meeple.phases.dqn.shared import SharedModel

IDLE_S = 0.002  # sleep of a worker waiting for another (keeps it off the CPU)


def update_budget(env_steps: int, learning_starts: int, updates_per_step: float) -> int:
    """Updates a learner may have done once the actor has played ``env_steps`` turns."""
    return (
        int((env_steps - learning_starts) * updates_per_step) if env_steps >= learning_starts else 0
    )


class Report(StrEnum):
    """Kinds of messages workers send to the main process."""

    READY = "ready"  # any worker: set up, entering its loop
    EPISODE = "episode"  # actor: per-agent returns of a finished episode
    ACTOR = "actor"  # actor: env steps, epsilon, syncs
    LEARNER = "learner"  # learner: loss, updates, publishes
    FINISHED = "finished"  # actor: reached its step budget
    ERROR = "error"  # any worker: the traceback of the exception that ends it


@dataclass
class SharedRunState:
    """Per agent a shared model and a shared buffer; run-wide counters, stop flag and report queue.

    ``env_steps`` is the global epoch (turns played by the actor; learners pace their updates on it).
    """

    models: list[SharedModel]
    buffers: list[TensorDictReplayBuffer]
    ctx: Any = field(repr=False, default=None)

    def __post_init__(self) -> None:
        ctx = self.ctx or mp.get_context("spawn")
        self.ctx = None  # contexts do not pickle; the primitives below carry their own
        self.stop = ctx.Event()
        self.env_steps_value = ctx.Value("q", 0)
        self.updates = ctx.Array("q", len(self.models))
        self.reports = ctx.Queue()
        self.parent_pid = os.getpid()

    def release(self) -> None:
        """Drop this process's handles on the run-wide primitives (their semaphores unlink once freed)."""
        if getattr(self, "reports", None) is not None:
            self.reports.close()
            self.reports.join_thread()
        self.stop = self.env_steps_value = self.updates = self.reports = None

    # -- stop --
    def should_stop(self) -> bool:
        """Stop requested, or the main process is gone (never outlive it as an orphan)."""
        return self.stop.is_set() or os.getppid() != self.parent_pid

    # -- counters --
    @property
    def env_steps(self) -> int:
        return int(self.env_steps_value.value)

    def set_env_steps(self, steps: int) -> None:
        self.env_steps_value.value = steps

    def wait_for_updates(self, target: int) -> float:
        """Block until every learner has done ``target`` updates or a stop is due; returns seconds waited."""
        t0 = time.perf_counter()
        while min(self.updates) < target and not self.should_stop():
            time.sleep(IDLE_S)
        return time.perf_counter() - t0

    # -- reports --
    def report(self, kind: Report, sender: str, payload: dict[str, Any]) -> None:
        self.reports.put((str(kind), sender, payload))

    def drain(self, timeout: float = 0.0) -> list[tuple[str, str, dict[str, Any]]]:
        """All reports waiting now (the first one waited for up to ``timeout`` seconds)."""
        out = []
        try:
            out.append(self.reports.get(timeout=timeout) if timeout else self.reports.get_nowait())
            while True:
                out.append(self.reports.get_nowait())
        except queue.Empty:
            pass
        return out
