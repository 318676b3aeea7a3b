"""SelfPlay of meeple_native: complete games and consistent samples, batching,
timeout flushes, stop / close / context manager, evaluator errors, determinism."""

from __future__ import annotations

import _thread
import os
import signal
import threading
import time

import numpy as np
import pytest

import meeple_native as mn


def native_threads() -> int:
    """Threads of this process (std::threads included)."""
    return len(os.listdir("/proc/self/task"))


def threads_back_to(before: int, timeout: float = 2.0) -> bool:
    """True once the process has at most `before` threads again (a joined thread may take a
    moment to leave the OS thread list; run() joins its workers). "At most": in the full
    suite, background threads of earlier tests (MLflow, torch, servers) may end meanwhile."""
    deadline = time.monotonic() + timeout
    while native_threads() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    return native_threads() <= before


class Evaluator:
    """Trivial numpy evaluator: logits prefer the centre, value from a stone count;
    counts calls and rows, can raise or stop the run after some calls."""

    def __init__(self, raise_at: int | None = None, on_call=None, delay: float = 0.0):
        self.calls = 0
        self.rows = 0
        self.raise_at = raise_at
        self.on_call = on_call
        self.delay = delay
        self.weights = np.array([0.0, 0.5, 1.0, 1.5, 1.0, 0.5, 0.0], np.float32)

    def __call__(self, planes, legal):
        self.calls += 1
        self.rows += len(planes)
        assert planes.dtype == np.float32 and planes.shape[1:] == (3, 6, 7) and planes.shape[0] >= 1
        assert legal.dtype == np.bool_ and legal.shape == (len(planes), 7)
        if self.raise_at is not None and self.calls >= self.raise_at:
            raise EvaluatorBroke(f"call {self.calls}")
        if self.on_call is not None:
            self.on_call(self)
        if self.delay:
            time.sleep(self.delay)
        centre = planes[:, 0, :, 3].sum(1) - planes[:, 1, :, 3].sum(1)
        logits = np.broadcast_to(self.weights, (len(planes), 7))
        # exact arithmetic (no SIMD-vs-scalar ulp differences): a row's output
        # does not depend on the batch it comes in, which the determinism test needs
        return logits, np.clip(0.25 * centre, -1.0, 1.0).astype(np.float32)


class EvaluatorBroke(Exception):
    pass


def check_samples(out: dict, num_games: int) -> None:
    n = len(out["value"])
    assert out["planes"].shape == (n, 3, 6, 7) and out["planes"].dtype == np.float32
    assert out["policy"].shape == (n, 7) and out["policy"].dtype == np.float32
    assert out["value"].shape == (n,) and out["value"].dtype == np.float32
    assert out["legal"].shape == (n, 7) and out["legal"].dtype == np.bool_
    assert len(out["moves"]) == len(out["winner"]) == len(out["game_id"]) == num_games
    assert n == sum(len(m) for m in out["moves"])
    assert np.allclose(out["policy"].sum(1), 1.0, atol=1e-5)
    assert not (out["policy"][~out["legal"]]).any()
    assert set(np.unique(out["value"])) <= {-1.0, 0.0, 1.0}
    obs = np.empty((3, 6, 7), np.float32)
    k = 0
    for gi, moves in enumerate(out["moves"]):
        final = mn.Connect4.from_moves(moves)  # raises on an illegal sequence
        assert final.is_terminal()
        assert out["winner"][gi] == (-1 if final.winner() is None else final.winner())
        pos = mn.Connect4()
        for ply, col in enumerate(moves):
            assert out["game"][k] == gi and out["ply"][k] == ply
            pos.encode(obs)
            assert np.array_equal(out["planes"][k], obs)
            assert out["legal"][k].tolist() == [pos.is_legal(c) for c in range(7)]
            want = (
                0.0 if final.winner() is None else (1.0 if final.winner() == pos.to_play else -1.0)
            )
            assert out["value"][k] == want
            pos.play(int(col) - 1)
            k += 1


def check_metrics(m: dict, cfg: dict) -> None:
    for key in [
        "simulations_per_s",
        "positions_per_s",
        "games_per_h",
        "batch_size_hist",
        "mean_fill_ratio",
        "queue_latency_p50_us",
        "queue_latency_p99_us",
        "evaluator_idle_fraction",
        "cache_hit_rate",
    ]:
        assert key in m, key
    hist = m["batch_size_hist"]
    assert len(hist) == cfg["batch_size"] + 1 and hist[0] == 0
    assert sum(hist) == m["batches"]
    assert sum(i * h for i, h in enumerate(hist)) == m["evaluations"]
    assert m["evaluations"] == m["cache_lookups"] - m["cache_hits"]
    assert 0.0 <= m["cache_hit_rate"] <= 1.0 and 0.0 <= m["evaluator_idle_fraction"] <= 1.0
    assert 0.0 < m["mean_fill_ratio"] <= 1.0
    assert m["queue_latency_p50_us"] <= m["queue_latency_p99_us"]
    sims = cfg["num_simulations"]
    # every move searched num_simulations leaves plus the root's own evaluation
    assert m["simulations"] == m["positions"] * (sims + 1)


@pytest.mark.parametrize(
    "workers,games,leaves,spin", [(1, 1, 1, 0), (1, 1, 1, 20), (1, 4, 4, 0), (4, 3, 2, 20)]
)
def test_complete_games_and_samples(workers, games, leaves, spin):
    cfg = dict(
        num_simulations=24,
        num_workers=workers,
        games_per_worker=games,
        leaves_per_game=leaves,
        batch_size=8,
        timeout_us=500,
        spin_us=spin,
    )
    ev = Evaluator()
    before = native_threads()
    with mn.SelfPlay(ev, **cfg) as sp:
        out = sp.run(6)
        assert not sp.running
    assert threads_back_to(before)
    check_samples(out, 6)
    m = out["metrics"]
    check_metrics(m, cfg)
    assert m["games"] == 6 and not m["stopped"] and m["positions"] == len(out["value"])
    assert ev.rows == m["evaluations"] and ev.calls == m["batches"]
    if workers * games * leaves > 1:
        assert m["mean_batch_size"] > 1.0


def test_batches_fill_with_many_games():
    cfg = dict(
        num_simulations=32, num_workers=2, games_per_worker=16, leaves_per_game=4, batch_size=32
    )
    out = mn.SelfPlay(Evaluator(), **cfg).run(32)
    m = out["metrics"]
    check_metrics(m, cfg)
    assert m["mean_batch_size"] > 8 and m["cache_hits"] > 0
    assert sorted(out["game_id"].tolist()) == list(range(32))


def test_builtin_uniform_evaluator_and_runs_continue_game_ids():
    sp = mn.SelfPlay(None, num_simulations=16, num_workers=2, games_per_worker=2, batch_size=4)
    a = sp.run(5)
    b = sp.run(3)
    check_samples(a, 5)
    check_samples(b, 3)
    assert a["game_id"].tolist() == [0, 1, 2, 3, 4] and b["game_id"].tolist() == [5, 6, 7]
    assert sp.metrics["games"] == 3
    assert sp.run(0)["metrics"]["games"] == 0


def test_timeout_flushes_batch_larger_than_inflight_leaves():
    """batch_size > W*G*L: only the timeout can flush (flush_when_idle=False)."""
    cfg = dict(
        num_simulations=8,
        num_workers=2,
        games_per_worker=2,
        leaves_per_game=1,
        batch_size=64,
        timeout_us=2000,
        flush_when_idle=False,
    )
    ev = Evaluator()
    t0 = time.perf_counter()
    out = mn.SelfPlay(ev, **cfg).run(2)
    elapsed = time.perf_counter() - t0
    m = out["metrics"]
    check_samples(out, 2)
    assert max(i for i, h in enumerate(m["batch_size_hist"]) if h) <= 4
    assert m["queue_latency_p50_us"] >= 1000  # items waited for the 2 ms timeout
    assert elapsed < 20
    # flush_when_idle: with a timeout of 10 s per batch the run still ends at once,
    # since the batch is flushed as soon as every worker waits for results
    t0 = time.perf_counter()
    out2 = mn.SelfPlay(
        Evaluator(), **{**cfg, "flush_when_idle": True, "timeout_us": 10_000_000}
    ).run(2)
    assert time.perf_counter() - t0 < 20
    assert out2["metrics"]["games"] == 2 and out2["metrics"]["queue_latency_p99_us"] < 5e6


def test_stop_from_evaluator_mid_run():
    ev = Evaluator(on_call=lambda e: sp.stop() if e.calls == 20 else None)
    sp = mn.SelfPlay(
        ev,
        num_simulations=50,
        num_workers=2,
        games_per_worker=4,
        leaves_per_game=2,
        batch_size=64,
        timeout_us=100000,
    )
    before = native_threads()
    t0 = time.perf_counter()
    out = sp.run(1000)
    assert time.perf_counter() - t0 < 5
    assert threads_back_to(before)
    m = out["metrics"]
    assert m["stopped"] and m["games"] < 1000
    check_samples(out, m["games"])
    assert ev.calls == 20  # no evaluation after the stop
    # the next run starts clean
    out = sp.run(2)
    assert out["metrics"]["games"] == 2 and not out["metrics"]["stopped"]


def test_stop_from_another_thread_with_half_full_queue():
    """A slow evaluator and a long timeout: the queue holds a partial batch when
    stop() arrives from another thread; run() returns promptly."""
    ev = Evaluator(delay=0.01)
    sp = mn.SelfPlay(
        ev,
        num_simulations=200,
        num_workers=4,
        games_per_worker=8,
        leaves_per_game=4,
        batch_size=512,
        timeout_us=2_000_000,
        flush_when_idle=False,
    )
    before = native_threads()
    timer = threading.Timer(0.3, sp.stop)
    timer.start()
    t0 = time.perf_counter()
    out = sp.run(1000)
    elapsed = time.perf_counter() - t0
    timer.join()
    assert elapsed < 1.5, elapsed
    assert out["metrics"]["stopped"]
    assert threads_back_to(before)


@pytest.mark.parametrize("raise_at", [1, 5])
def test_evaluator_exception_propagates(raise_at):
    ev = Evaluator(raise_at=raise_at)
    sp = mn.SelfPlay(
        ev, num_simulations=30, num_workers=4, games_per_worker=4, leaves_per_game=4, batch_size=16
    )
    before = native_threads()
    t0 = time.perf_counter()
    with pytest.raises(EvaluatorBroke, match=f"call {raise_at}"):
        sp.run(100)
    assert time.perf_counter() - t0 < 5
    assert threads_back_to(before) and not sp.running
    ev.raise_at = None
    assert sp.run(3)["metrics"]["games"] == 3


def test_bad_evaluator_output_raises():
    sp = mn.SelfPlay(
        lambda p, lg: (np.zeros((len(p), 6)), np.zeros(len(p))), num_simulations=4, num_workers=2
    )
    with pytest.raises(ValueError, match=r"policy must have shape"):
        sp.run(2)
    sp = mn.SelfPlay(lambda p, lg: None, num_simulations=4)
    with pytest.raises(TypeError, match="tuple"):
        sp.run(1)


def test_keyboard_interrupt_ends_run():
    # Ctrl-C is repeated until the run ends: an interrupt whose handler runs while the engine
    # is inside a Python call that clears errors can be lost (seen once in ~a dozen CI runs),
    # and a user would press again. Interrupts after the run are ignored, never stray.
    sp = mn.SelfPlay(
        Evaluator(delay=0.002), num_simulations=400, num_workers=2, games_per_worker=2, batch_size=4
    )
    before = native_threads()
    done = threading.Event()

    def on_sigint(signum, frame):
        if not done.is_set():
            raise KeyboardInterrupt

    def press_ctrl_c():
        while not done.wait(0.3):
            _thread.interrupt_main()

    previous = signal.signal(signal.SIGINT, on_sigint)
    presser = threading.Thread(target=press_ctrl_c)
    presser.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            sp.run(1000)
    finally:
        done.set()
        presser.join()
        signal.signal(signal.SIGINT, previous)
    assert threads_back_to(before)


def test_context_manager_exit_stops_a_run_in_another_thread():
    result = {}
    sp = mn.SelfPlay(
        Evaluator(delay=0.001), num_simulations=200, num_workers=2, games_per_worker=4, batch_size=8
    )
    before = native_threads()
    with sp:
        t = threading.Thread(target=lambda: result.setdefault("out", sp.run(10_000)))
        t.start()
        time.sleep(0.3)
        assert sp.running
    # __exit__ stopped the run and waited for it
    assert not sp.running
    t.join(timeout=5)
    assert not t.is_alive()
    assert result["out"]["metrics"]["stopped"]
    assert threads_back_to(before)
    with pytest.raises(RuntimeError, match="closed"):
        sp.run(1)


def test_close_from_inside_the_evaluator_does_not_deadlock():
    ev = Evaluator(on_call=lambda e: sp.close() if e.calls == 3 else None)
    sp = mn.SelfPlay(ev, num_simulations=20, num_workers=2, batch_size=2)
    out = sp.run(100)
    assert out["metrics"]["stopped"]


def test_determinism_with_fixed_seed():
    cfg = dict(
        num_simulations=12,
        leaves_per_game=1,
        batch_size=8,
        dirichlet_epsilon=0.25,
        temperature_moves=10,
    )
    a = mn.SelfPlay(Evaluator(), num_workers=1, games_per_worker=1, seed=7, **cfg).run(4)
    b = mn.SelfPlay(Evaluator(), num_workers=1, games_per_worker=1, seed=7, **cfg).run(4)
    # per-game random streams: workers and concurrent games do not change the games
    c = mn.SelfPlay(Evaluator(), num_workers=3, games_per_worker=2, seed=7, **cfg).run(4)
    d = mn.SelfPlay(Evaluator(), num_workers=1, games_per_worker=1, seed=8, **cfg).run(4)
    for key in ["planes", "policy", "value", "legal", "game", "ply"]:
        assert np.array_equal(a[key], b[key]), key
        assert np.array_equal(a[key], c[key]), key
    assert a["moves"] == b["moves"] == c["moves"]
    assert a["moves"] != d["moves"]
    assert len(set(a["moves"])) > 1  # temperature and noise vary the games


def test_caller_provided_planes_buffers():
    bufs = (np.zeros((8, 3, 6, 7), np.float32), np.zeros((8, 3, 6, 7), np.float32))
    seen = set()

    def ev(planes, legal):
        assert any(np.shares_memory(planes, b) for b in bufs)
        seen.update(i for i, b in enumerate(bufs) if np.shares_memory(planes, b))
        return np.zeros((len(planes), 7), np.float32), np.zeros(len(planes), np.float32)

    out = mn.SelfPlay(
        ev, num_simulations=16, num_workers=2, games_per_worker=4, batch_size=8, planes_buffers=bufs
    ).run(4)
    check_samples(out, 4)
    assert seen == {0, 1}
    with pytest.raises(ValueError, match=r"planes_buffers\[1\]"):
        mn.SelfPlay(ev, batch_size=8, planes_buffers=(bufs[0], np.zeros((4, 3, 6, 7), np.float32)))
    with pytest.raises(TypeError, match="float32"):
        mn.SelfPlay(ev, batch_size=8, planes_buffers=(bufs[0], np.zeros((8, 3, 6, 7))))


def test_bad_config():
    for key, val in [
        ("num_workers", 0),
        ("batch_size", 0),
        ("leaves_per_game", 0),
        ("num_simulations", 0),
        ("timeout_us", -1),
        ("dirichlet_epsilon", 1.5),
        ("cache_size", -1),
        ("spin_us", -1),
    ]:
        with pytest.raises(ValueError, match=key):
            mn.SelfPlay(None, **{key: val})
    with pytest.raises(ValueError, match="policy"):
        mn.SelfPlay(None, policy="probs")
    with pytest.raises(TypeError, match="callable"):
        mn.SelfPlay(3)
    with pytest.raises(ValueError, match="num_games"):
        mn.SelfPlay(None).run(-1)


def test_torch_tensors_as_buffers_and_outputs():
    """Pinned torch tensors are the intended planes buffers on CUDA machines; on
    CPU, plain tensors check the same path: the evaluator gets slices of them."""
    torch = pytest.importorskip("torch")
    bufs = (torch.zeros(8, 3, 6, 7), torch.zeros(8, 3, 6, 7))
    kinds = set()

    def ev(planes, legal):
        kinds.add(type(planes))
        assert any(planes.data_ptr() == b.data_ptr() for b in bufs)
        n = len(planes)
        return torch.zeros(n, 7), torch.zeros(n)

    out = mn.SelfPlay(
        ev, num_simulations=16, num_workers=2, games_per_worker=4, batch_size=8, planes_buffers=bufs
    ).run(4)
    check_samples(out, 4)
    assert kinds == {torch.Tensor}
