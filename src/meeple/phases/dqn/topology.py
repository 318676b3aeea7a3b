"""Independent multi-agent topology: one actor process, one learner process per agent.

The main process owns everything shared (per agent a :class:`SharedModel` and a shared replay
buffer; the run's :class:`SharedRunState`), spawns the workers with the ``spawn`` start method,
relays their reports, and ends them: on completion, on a stop request (``Ctrl-C``), or when
one crashes, in which case the run stops and :class:`WorkerCrashedError` carries the worker's
traceback. Workers ignore ``SIGINT`` (the main process decides), die with the main process
(``PR_SET_PDEATHSIG`` on Linux, and a parent check in their loops), and are terminated, then
killed, if they miss the stop deadline.
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import logging
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from meeple.errors import MeepleError
from meeple.phases.dqn.state import Report, SharedRunState

ACTOR_TARGET = "meeple.phases.dqn.actor:run_actor"
LEARNER_TARGET = "meeple.phases.dqn.learner:run_learner"
POLL_S = 0.05
log = logging.getLogger("meeple")


class WorkerCrashedError(MeepleError):
    """A worker process of the topology failed; the message ends with its traceback."""

    def __init__(self, worker: str, detail: str) -> None:
        self.worker, self.detail = worker, detail
        super().__init__(
            f"{worker} crashed; the run was stopped. Its traceback:\n{detail.rstrip()}"
        )


def _die_with_parent() -> None:
    """Linux: get SIGTERM when the parent dies (covers a SIGKILLed main process)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(
                1, signal.SIGTERM
            )  # PR_SET_PDEATHSIG = 1
        except OSError:
            pass


def resolve(target: str) -> Callable[..., Any]:
    """``"package.module:function"`` -> the function."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def _worker_main(name: str, target: str, state: SharedRunState, kwargs: dict[str, Any]) -> None:
    """Entry point of every spawned worker: run ``target``; report any exception with its traceback.

    Ends with ``os._exit`` once its reports are flushed: a spawned interpreter's normal shutdown
    (torch and TorchRL teardown) takes seconds on a loaded machine and holds nothing we need.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    torch.set_num_threads(1)
    code = 0
    try:
        resolve(target)(state, **kwargs)
    except BaseException:
        state.report(Report.ERROR, name, {"traceback": traceback.format_exc()})
        code = 1
    finally:
        state.reports.close()
        state.reports.join_thread()  # every report reaches the main process before we exit
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


@dataclass
class Worker:
    name: str
    target: str
    kwargs: dict[str, Any]
    process: mp.process.BaseProcess | None = None


class IndependentTopology:
    """Spawn, watch and stop the actor and the learners sharing ``state``.

    ``on_report(kind, sender, payload)`` is called in the main process for every report.
    """

    def __init__(
        self,
        state: SharedRunState,
        actor_kwargs: Mapping[str, Any],
        learner_kwargs: Sequence[Mapping[str, Any]],
        agent_names: Sequence[str],
        *,
        stop_timeout_s: float = 10.0,
        final_updates: int = 0,
        actor_target: str = ACTOR_TARGET,
        learner_target: str = LEARNER_TARGET,
    ) -> None:
        self.state = state
        self.stop_timeout_s = stop_timeout_s
        self.final_updates = final_updates  # every learner's update budget for the whole run
        self.ctx = mp.get_context("spawn")
        self.workers = [Worker("actor", actor_target, dict(actor_kwargs))] + [
            Worker(f"learner[{name}]", learner_target, dict(kw))
            for name, kw in zip(agent_names, learner_kwargs)
        ]
        self.finished = False
        self.errors: dict[str, str] = {}
        self.ready: set[str] = set()
        self.started_at = 0.0

    # -- lifecycle --
    @property
    def done(self) -> bool:
        """The actor played its budget and every learner did its updates for it."""
        return self.finished and min(self.state.updates) >= self.final_updates

    @property
    def started(self) -> bool:
        return any(w.process is not None for w in self.workers)

    def start(self) -> None:
        if self.started:
            raise RuntimeError("the topology was started already")
        self.started_at = time.perf_counter()
        for w in self.workers:
            w.process = self.ctx.Process(
                target=_worker_main,
                args=(w.name, w.target, self.state, w.kwargs),
                name=f"meeple-{w.name}",
                daemon=True,
            )
            w.process.start()

    @property
    def pids(self) -> list[int]:
        return [
            w.process.pid
            for w in self.workers
            if w.process is not None and w.process.pid is not None
        ]

    def _dispatch(self, reports, on_report) -> None:
        for kind, sender, payload in reports:
            if kind == Report.ERROR:
                self.errors.setdefault(sender, payload["traceback"])
            elif kind == Report.FINISHED:
                self.finished = True
            elif kind == Report.READY:
                self.ready.add(sender)
                if len(self.ready) == len(self.workers):
                    log.info(
                        "all %d worker processes running (start-up took %.1fs)",
                        len(self.workers),
                        time.perf_counter() - self.started_at,
                    )
            if on_report is not None:
                on_report(kind, sender, payload)

    def _exited(self) -> dict[str, int]:
        """Exit code of every worker that has exited, by name."""
        return {
            w.name: w.process.exitcode
            for w in self.workers
            if w.process is not None and w.process.exitcode is not None
        }

    def _crashed(self, exited: Mapping[str, int]) -> tuple[str, str] | None:
        """(worker, detail) of the first worker that failed, if any.

        ``exited`` must be read *before* the last drain of the report queue: a worker flushes its
        reports before it exits, so only then has every report of an exited worker (the actor's
        FINISHED above all) been dispatched. Judging an exit seen after the drain raced the
        actor's last report and called a finished run a crash.
        """
        for name, code in exited.items():
            if name in self.errors:
                return name, self.errors[name]
            if code != 0:
                return (
                    name,
                    f"exited with code {code} without a Python traceback (killed by a signal?)",
                )
            if not (self.finished or self.state.stop.is_set()):
                return name, "exited before the run finished"
        if self.errors:  # reported, still exiting
            name = next(iter(self.errors))
            return name, self.errors[name]
        return None

    def run(
        self, on_report: Callable[[str, str, dict], None] | None = None, *, poll_s: float = POLL_S
    ) -> None:
        """Start the workers (unless :meth:`start` did), relay reports until the actor has played its
        env steps and every learner has done its updates for them; raise
        :class:`WorkerCrashedError` if a worker crashes.

        ``KeyboardInterrupt`` (Ctrl-C) stops every worker, then propagates.
        """
        if not self.started:
            self.start()
        # Ctrl-C only raises a flag: a KeyboardInterrupt in the middle of reading the report
        # queue would leave a half-read message in its pipe, and the workers blocked on it.
        interrupted: list[int] = []
        restore = None
        if threading.current_thread() is threading.main_thread():
            restore = signal.signal(signal.SIGINT, lambda signum, frame: interrupted.append(signum))
        try:
            while not self.done and not self.state.stop.is_set() and not interrupted:
                exited = self._exited()
                self._dispatch(self.state.drain(timeout=poll_s), on_report)
                if crash := self._crashed(exited):
                    raise WorkerCrashedError(*crash)
            if interrupted:
                raise KeyboardInterrupt
        finally:
            self.stop(on_report)
            if restore is not None:
                signal.signal(signal.SIGINT, restore)

    def stop(self, on_report: Callable[[str, str, dict], None] | None = None) -> float:
        """Ask every worker to stop; terminate, then kill, the ones past the deadline. Returns seconds taken."""
        t0 = time.perf_counter()
        self.state.stop.set()
        deadline = t0 + self.stop_timeout_s
        live = [w.process for w in self.workers if w.process is not None]
        while any(p.is_alive() for p in live) and time.perf_counter() < deadline:
            self._dispatch(
                self.state.drain(timeout=POLL_S), on_report
            )  # a full queue would block their exit
        for p in live:
            if p.is_alive():
                p.terminate()
        for p in live:
            p.join(timeout=2.0)
            if p.is_alive():
                p.kill()
                p.join(timeout=2.0)
        self._dispatch(self.state.drain(), on_report)
        return time.perf_counter() - t0

    def close(self) -> None:
        """Stop (if still running) and release every process and shared primitive this object holds.

        Call it last: afterwards the shared state's stop flag, counters and queue are gone.
        Named semaphores of the spawn context are unlinked as their last handle is freed.
        """
        if self.state.stop is not None:
            self.stop()
        for w in self.workers:
            if w.process is not None and not w.process.is_alive():
                w.process.close()  # joined in stop(); also drops the args that reference the state
                w.process = None
        self.state.release()
        gc.collect()


@contextmanager
def running(topology: IndependentTopology) -> Iterator[IndependentTopology]:
    """Start the workers; whatever happens in the block, none outlives it and nothing stays behind."""
    topology.start()
    try:
        yield topology
    finally:
        topology.close()
