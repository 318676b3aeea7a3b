"""The shm transport's native hot loops (meeple_native.shm) against their Python path:
the same spin budget, the same waits and errors, and bounds on what they may touch."""

import importlib
import mmap
import os
import random
import threading
import time

import numpy as np
import pytest

from meeple.transport.waiting import SpinBudget, native_shm
from tests.transport.conftest import COUNTER, client_for, serving

# The quick start installs ./native: without its shm module these tests fail (a stale build:
# pip install ./native again), unless the environment turned the native path off on purpose.
pytestmark = pytest.mark.skipif(
    os.environ.get("MEEPLE_NATIVE_SHM") == "0", reason="MEEPLE_NATIVE_SHM=0: the Python path"
)
native = native_shm() or importlib.import_module("meeple_native.shm")


def test_native_and_python_spin_budgets_agree_on_every_event():
    rng = random.Random(7)
    for _ in range(20):
        ours, theirs = SpinBudget(), native.SpinBudget()
        for step in range(400):
            event = rng.choice(["next", "next", "spun", "yielded", "blocked", "blocked_within"])
            if event == "next":
                assert ours.next_scales() == pytest.approx(theirs.next_scales()), step
            elif event == "blocked_within":
                ours.blocked(within_budget=True)
                theirs.blocked(within_budget=True)
            else:
                getattr(ours, event)()
                getattr(theirs, event)()
            assert (ours.scale, ours.spin) == (theirs.scale, theirs.spin), (step, event)
        assert ours.waits == theirs.waits


def _waiter(mm, *, changed=False, timeout_s=5.0, alive=None):
    return native.WordWaiter(mm, 0, 4, changed, 20.0, 200.0, timeout_s, alive)


def test_a_native_wait_ends_on_a_write_from_another_thread_in_each_phase():
    mm = mmap.mmap(-1, 4096)
    words = memoryview(mm).cast("I")
    words[0] = 5
    ready = _waiter(mm)
    assert ready.wait(5) == 5 and ready.ended == (0, 0, 0)  # ready at once: not counted
    # yield_us: 0.2 s of yielding catches a write 5 ms later; none: it waits on the futex
    for yield_us, phase in [(200_000.0, 1), (0.0, 2)]:
        waiter = native.WordWaiter(mm, 0, 4, False, 20.0, yield_us, 5.0)
        words[0] = 0
        threading.Timer(0.005, lambda: words.__setitem__(0, 7)).start()
        assert waiter.wait(7) == 7
        assert waiter.ended[phase] == 1, waiter.ended
        assert words[1] == 0, "the sleeping flag is down again"
    assert waiter.budget.scale < 1.0, "a wait that had to block shrinks the budget"
    changed = _waiter(mm, changed=True)
    threading.Timer(0.01, lambda: words.__setitem__(0, 8)).start()
    assert changed.wait(7) == 8  # a doorbell: any other value
    words.release()


def test_a_native_wait_times_out_or_names_the_dead_peer():
    mm = mmap.mmap(-1, 4096)
    start = time.perf_counter()
    with pytest.raises(TimeoutError, match="no answer within 0.1 s"):
        _waiter(mm, timeout_s=0.1).wait(1)
    assert 0.1 <= time.perf_counter() - start < 2.0
    with pytest.raises(ConnectionError, match="worker 3 died"):
        _waiter(mm, alive=lambda: "worker 3 died").wait(1)


def test_native_objects_refuse_offsets_outside_their_buffer_and_bad_actions():
    mm = mmap.mmap(-1, 64)
    with pytest.raises(ValueError, match="offset 64 is outside the 64-byte buffer"):
        native.WordWaiter(mm, 64, 0, False, 1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="not aligned"):
        native.Ring(mm, [2], 0, 4)
    with pytest.raises(BufferError, match="not writable"):
        native.Ring(b"\0" * 64, [0], 0, 4)
    ring, reply = native.Ring(mm, [8], 0, 4), _waiter(mm)
    step = native.OneWorkerStep(mm, [12, 16], ring, reply, 20, 4096)
    with pytest.raises(TypeError, match="expected 2 contiguous int32 values"):
        step(np.zeros(2, np.int64))
    with pytest.raises(TypeError, match="expected 2 contiguous int32 values"):
        step(np.zeros(3, np.int32))
    assert mm[:4] == b"\0" * 4, "a refused request rings nobody"


def test_the_channel_takes_the_native_path_unless_told_not_to(monkeypatch):
    for setting, expected in [("1", True), ("0", False)]:
        monkeypatch.setenv("MEEPLE_NATIVE_SHM", setting)
        with serving(COUNTER, "shm", num_envs=3, num_workers=1) as server, client_for(server) as c:
            assert c.channel.native is expected
            records = c.reset(0)
            for _ in range(12):  # crosses the episode end (5): auto-reset through either path
                records = c.step(np.argmax(records["mask"], axis=1).astype(np.int32))
            assert c.health()["steps"] == 36, "the workers publish their step counts"


def test_a_cycle_through_a_native_waiters_liveness_check_is_collected():
    import gc
    import weakref

    class Owner:
        pass

    def make() -> weakref.ref:
        owner = Owner()
        owner.waiter = _waiter(mmap.mmap(-1, 64), alive=lambda: owner)  # owner <-> waiter
        return weakref.ref(owner)

    ref = make()
    gc.collect()
    assert ref() is None, "the collector could not see through the native waiter"
