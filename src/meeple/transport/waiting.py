"""Waiting on a 32-bit word in shared memory: spin, then spin with ``sched_yield``, then futex.

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

_SYS_FUTEX = {"x86_64": 202, "aarch64": 98, "arm64": 98}.get(platform.machine())
_FUTEX_WAIT, _FUTEX_WAKE = 0, 1
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
SLICE_S = 0.01  # a futex wait wakes at least this often to check the peer is alive


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
    none, every 64th wait probes with 1/16 of it. Spinning pays only when the answer comes
    within microseconds and a core is free: on busy or oversubscribed cores the waiter soon
    blocks at once (measured: spinning waiters collapse once they outnumber cores)."""

    MIN = 1 / 16

    def __init__(self) -> None:
        self.scale = 1.0
        self.waits = 0

    def spun(self) -> None:
        self.scale = min(1.0, max(self.scale * 2, self.MIN))

    def blocked(self) -> None:
        self.scale = self.scale / 2 if self.scale > self.MIN else 0.0

    def next_scale(self) -> float:
        self.waits += 1
        if self.scale == 0.0 and self.waits % 64 == 0:
            return self.MIN
        return self.scale


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
    scale = 1.0 if budget is None else budget.next_scale()
    spin_end = start + policy.spin_us * scale * 1e-6
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
                budget.spun()
            return value
    if budget is not None and scale > 0.0:
        budget.blocked()
    deadline = start + (policy.timeout_s if timeout_s is None else timeout_s)
    while True:
        set_sleeping(1)
        value = read()
        if not ready(value):
            futex_wait(address, value, SLICE_S)
            value = read()
        set_sleeping(0)
        if ready(value):
            return value
        if alive is not None and (gone := alive()):
            raise ConnectionError(gone)
        if now() > deadline:
            raise WaitTimeout(f"no answer within {deadline - start:.1f} s")
