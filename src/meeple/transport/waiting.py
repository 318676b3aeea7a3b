"""Waiting on a 32-bit word in shared memory: spin, then spin with ``sched_yield``, then futex
(and the same for a socket's ``recv``: :func:`spin_then_block`).

Spinning costs nothing in latency when the reply comes within microseconds and a core is
free; yielding keeps many spinning waiters from starving the process they wait for once
they outnumber cores; the futex makes long idle waits free. Every wait has a deadline and
a liveness check, so a dead peer raises instead of hanging.
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
    pass


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
        scale = self.next_scale()
        return min(1.0 if self.spin_probe else self.spin, scale), scale


def wait_until(
    read: Callable[[], int],
    ready: Callable[[int], bool],
    *,
    address: int,
    set_sleeping: Callable[[int], None],
    policy: WaitPolicy,
    alive: Callable[[], str | None] | None = None,
    timeout_s: float | None = None,
    budget: SpinBudget | None = None,
) -> int:
    """Wait until ``ready(read())``; returns the value read.

    ``address`` is the word's address (for the futex) and ``set_sleeping(1/0)`` flags the
    futex wait so the other side knows to wake it. ``alive()`` returns why the peer is gone
    (or None); it is called only on the slow path. ``budget`` makes spinning adaptive
    (:class:`SpinBudget`). Raises :class:`WaitTimeout`.
    """
    value = read()
    if ready(value):
        return value
    now = time.perf_counter
    start = now()
    spin, scale = (1.0, 1.0) if budget is None else budget.next_scales()
    spin_end = start + policy.spin_us * spin * 1e-6
    while now() < spin_end:
        value = read()
        if ready(value):
            if budget is not None:
                budget.spun()
            return value
    yield_end = spin_end + policy.yield_us * scale * 1e-6
    while now() < yield_end:
        os.sched_yield()
        value = read()
        if ready(value):
            if budget is not None:
                budget.yielded()
            return value
    deadline = start + (policy.timeout_s if timeout_s is None else timeout_s)
    while True:
        set_sleeping(1)
        value = read()
        if not ready(value):
            futex_wait(address, value, SLICE_S)
            value = read()
        set_sleeping(0)
        if ready(value):
            if budget is not None:
                budget.blocked(now() - start <= (policy.spin_us + policy.yield_us) * 1e-6)
            return value
        if alive is not None and (gone := alive()):
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
