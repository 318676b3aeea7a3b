"""Waiting on a 32-bit word in shared memory: spin, then spin with ``sched_yield``, then futex
(and the same for a socket's ``recv``: :func:`spin_then_block`).

Spinning costs nothing in latency when the reply comes within microseconds and a core is
free; yielding keeps many spinning waiters from starving the process they wait for once
they outnumber cores; the futex makes long idle waits free. Every wait has a deadline and
a liveness check, so a dead peer raises instead of hanging.

:func:`native_shm` gives the same waits (and the shm transport's ring and publish) in native
code, ``meeple_native.shm``, where it is installed; this module is their Python path.
"""

from __future__ import annotations

import ctypes
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

_SYS_FUTEX = {"x86_64": 202, "aarch64": 98, "arm64": 98}.get(platform.machine())
_FUTEX_WAIT, _FUTEX_WAKE = 0, 1
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
SLICE_S = 0.01  # a futex wait wakes at least this often to check the peer is alive
T = TypeVar("T")


def native_shm():
    """``meeple_native.shm`` (native waits, ring and publish for the shm transport), or None:
    without the native package, with one built before it had them, or when the environment
    sets ``MEEPLE_NATIVE_SHM=0`` (the Python path, for comparison and for tests)."""
    if os.environ.get("MEEPLE_NATIVE_SHM", "1") == "0":
        return None
    try:
        from meeple_native import shm
    except ImportError:
        return None
    return shm


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def futex_wait(address: int, expected: int, timeout_s: float) -> None:
    """Sleep while the u32 at ``address`` equals ``expected`` (at most ``timeout_s``)."""
    if _SYS_FUTEX is None:  # no futex: a short sleep keeps the loop correct, only slower
        time.sleep(min(timeout_s, 0.0005))
        return
    ts = _Timespec(int(timeout_s), int((timeout_s % 1) * 1e9))
    _libc.syscall(
        _SYS_FUTEX,
        ctypes.c_void_p(address),
        _FUTEX_WAIT,
        ctypes.c_uint32(expected),
        ctypes.byref(ts),
        None,
        0,
    )


def futex_wake(address: int) -> None:
    if _SYS_FUTEX is not None:
        _libc.syscall(_SYS_FUTEX, ctypes.c_void_p(address), _FUTEX_WAKE, 1 << 30, None, None, 0)


@dataclass(frozen=True)
class WaitPolicy:
    """``spin_us`` of pure spinning, then ``yield_us`` of spinning with ``sched_yield``, then futex."""

    spin_us: float = 20.0
    yield_us: float = 200.0
    timeout_s: float = 30.0


class WaitTimeout(TimeoutError):
    """No answer before the deadline (the native waiters raise a plain ``TimeoutError``)."""


class SpinBudget:
    """Adaptive spinning (one per waiter): a wait that ends while spinning doubles the spin
    budget (up to the policy's), one that has to block halves it, down to none; while at
    none, every 64th wait probes with the whole budget, and a probe that is answered in it
    restores it. Spinning pays only when the answer comes within microseconds and a core is
    free: on busy or oversubscribed cores the waiter soon blocks at once (measured: spinning
    waiters collapse once they outnumber cores).

    The pure spin has a budget of its own (``spin``, never above ``scale``): a wait that ends
    in the ``sched_yield`` phase halves it, since spinning without yielding only kept the
    peer from a shared core. Measured on the 2-core VM with one core taken by a training run:
    the shm client's and worker's 20 us spins before each yield cost ~40 us per 1-env round
    trip; a free core still catches answers by spinning (its waits end in the spin).

    A wait that blocked but was answered within the policy's whole budget (``spin_us +
    yield_us``) counts as a yielded one: the full budget would have caught it. Without this
    and the whole-budget probe, a burst of slow answers (another process holding the core for
    a few ms) could leave both sides blocking for good: each futex wake of an idle core took
    ~100 us on that VM, so answers stayed slower than any probe (1-env shm p50 ~200 us
    instead of ~30 us).
    """

    MIN = 1 / 16
    PROBE_EVERY = 64

    def __init__(self) -> None:
        self.scale = 1.0  # spin + yield phases
        self.spin = 1.0  # the pure spin phase
        self.waits = 0
        self.probe = self.spin_probe = False  # the current wait probes a budget at none

    @classmethod
    def _grow(cls, scale: float) -> float:
        return min(1.0, max(scale * 2, cls.MIN))

    @classmethod
    def _shrink(cls, scale: float) -> float:
        return scale / 2 if scale > cls.MIN else 0.0

    def spun(self) -> None:
        if self.scale == 1.0 and self.spin == 1.0:  # full budgets stay full (no probe is on)
            return
        self.scale = 1.0 if self.probe else self._grow(self.scale)
        self.spin = 1.0 if self.spin_probe else self._grow(self.spin)

    def yielded(self) -> None:
        self.scale = 1.0 if self.probe else self._grow(self.scale)
        self.spin = self._shrink(self.spin)

    def blocked(self, within_budget: bool = False) -> None:
        """A wait that had to block; ``within_budget``: answered within the whole policy budget."""
        if within_budget:
            self.yielded()
        else:
            self.scale, self.spin = self._shrink(self.scale), self._shrink(self.spin)

    def next_scale(self) -> float:
        """The spin + yield budget of the next wait (a fraction of the policy's)."""
        self.waits += 1
        self.probe = self.scale == 0.0 and self.waits % self.PROBE_EVERY == 0
        self.spin_probe = self.spin == 0.0 and self.waits % self.PROBE_EVERY == 0
        return 1.0 if self.probe else self.scale

    def next_scales(self) -> tuple[float, float]:
        """``(pure spin, spin + yield)`` budgets of the next wait."""
        if self.scale == 1.0 and self.spin == 1.0:  # no probe at full budgets
            self.waits += 1
            self.probe = self.spin_probe = False
            return 1.0, 1.0
        scale = self.next_scale()
        return min(1.0 if self.spin_probe else self.spin, scale), scale


class WordWaiter:
    """Waits on one u32 of shared memory: until ``words[index]`` equals a value, or
    (``changed``) differs from it. Spins, then spins with ``sched_yield``, then sleeps on the
    futex at ``address`` with ``words[sleeping]`` set to 1, so the other side knows to wake it.

    ``alive()`` returns why the peer is gone (or None); it is called only on the slow path.
    ``budget`` makes spinning adaptive (:class:`SpinBudget`); ``timeout_s`` defaults to the
    policy's. Everything but the value is fixed here once: a wait called with a read callback,
    a predicate and eight keyword arguments cost ~1 us of a ~5 us 1-env shm round trip.
    """

    __slots__ = ("words", "index", "changed", "address", "sleeping", "policy", "alive",
                 "timeout_s", "budget")  # fmt: skip

    def __init__(
        self,
        words: memoryview,
        index: int,
        *,
        changed: bool,
        address: int,
        sleeping: int,
        policy: WaitPolicy,
        alive: Callable[[], str | None] | None = None,
        timeout_s: float | None = None,
        budget: SpinBudget | None = None,
    ) -> None:
        self.words, self.index, self.changed = words, index, changed
        self.address, self.sleeping, self.policy, self.alive = address, sleeping, policy, alive
        self.timeout_s = policy.timeout_s if timeout_s is None else timeout_s
        self.budget = budget

    def wait(self, value: int) -> int:
        """The word once it is ready (equal to ``value``, or different if ``changed``).
        Raises :class:`WaitTimeout`, or ``ConnectionError`` when ``alive()`` says why."""
        words, index, changed = self.words, self.index, self.changed
        word = words[index]
        if (word != value) is changed:
            return word
        policy, budget = self.policy, self.budget
        now = time.perf_counter
        start = now()
        spin, scale = (1.0, 1.0) if budget is None else budget.next_scales()
        spin_end = start + policy.spin_us * spin * 1e-6
        # the pure spin reads the word inline: one index and one comparison a turn
        if changed:
            while now() < spin_end:
                word = words[index]
                if word != value:
                    if budget is not None:
                        budget.spun()
                    return word
        else:
            while now() < spin_end:
                if words[index] == value:
                    if budget is not None:
                        budget.spun()
                    return value
        yield_end = spin_end + policy.yield_us * scale * 1e-6
        while now() < yield_end:
            os.sched_yield()
            word = words[index]
            if (word != value) is changed:
                if budget is not None:
                    budget.yielded()
                return word
        return self._block(value, start)

    def _block(self, value: int, start: float) -> int:
        words, index, changed, policy = self.words, self.index, self.changed, self.policy
        now = time.perf_counter
        deadline = start + self.timeout_s
        while True:
            words[self.sleeping] = 1
            word = words[index]
            if (word != value) is not changed:
                futex_wait(self.address, word, SLICE_S)
                word = words[index]
            words[self.sleeping] = 0
            if (word != value) is changed:
                if self.budget is not None:
                    caught = now() - start <= (policy.spin_us + policy.yield_us) * 1e-6
                    self.budget.blocked(caught)
                return word
            if self.alive is not None and (gone := self.alive()):
                raise ConnectionError(gone)
            if now() > deadline:
                raise WaitTimeout(f"no answer within {deadline - start:.1f} s")


def spin_then_block(
    attempt: Callable[[], T | None],
    block: Callable[[], T],
    policy: WaitPolicy,
    budget: SpinBudget,
) -> T:
    """The policy of :func:`wait_until` for waits whose blocking call is not a futex (a
    socket's ``recv``): ``attempt()`` (a non-blocking try, ``None`` while nothing has come)
    while spinning, then between ``sched_yield`` calls, within the adaptive ``budget``; then
    ``block()``."""
    spin, scale = budget.next_scales()
    if scale == 0.0:  # not worth even one try (each is a system call)
        start = time.perf_counter()
        result = block()
        budget.blocked(time.perf_counter() - start <= (policy.spin_us + policy.yield_us) * 1e-6)
        return result
    now = time.perf_counter
    start = now()
    spin_end = start + policy.spin_us * spin * 1e-6
    while True:
        result = attempt()
        if result is not None:
            budget.spun()
            return result
        if now() >= spin_end:
            break
    yield_end = spin_end + policy.yield_us * scale * 1e-6
    while now() < yield_end:
        os.sched_yield()
        result = attempt()
        if result is not None:
            budget.yielded()
            return result
    result = block()
    budget.blocked(now() - start <= (policy.spin_us + policy.yield_us) * 1e-6)
    return result
