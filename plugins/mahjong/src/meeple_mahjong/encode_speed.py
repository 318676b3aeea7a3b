"""Encoder speed, for `python -m meeple.bench mahjong`: observations per CPU second of one core.

States are snapshots of seeded random games (every `stride`-th decision), so the rates cover
early, middle and late hands rather than one state. Rates use process CPU time (the native
loop runs in the calling thread), which a shared machine disturbs far less than wall time.
"""

from __future__ import annotations

import copy
import random
import time
from typing import Any

import numpy as np

from meeple_native import mahjong as _mj


def sample_states(games: int = 20, stride: int = 37, seed: int = 0) -> list[tuple[Any, int]]:
    """(game snapshot, seat to act) every `stride` decisions of `games` random games."""
    states = []
    for i in range(games):
        g = _mj.Game()
        g.set_record_events(False)
        g.reset(seed, i)
        rng = random.Random(seed * 1_000_003 + i)
        n = 0
        while not g.is_done():
            seat = g.pending()[0]
            if n % stride == 0:
                states.append((copy.copy(g), seat))
            g.step(seat, rng.choice(g.legal_actions(seat)))
            n += 1
    return states


def _per_s(n: int, cpu: float) -> float:
    return round(n / cpu, 1) if cpu > 0 else float("inf")


def encoder_rates(
    games: int = 20, stride: int = 37, repeats: int = 2000, seed: int = 0, peer: bool = True
) -> dict[str, Any]:
    """Observations/s: meeple's encoders in a native loop (`bench_encode`) and per Python call
    into a reused buffer; pymahjong's encoder (93x34 public, +18 oracle planes) per Python call
    into a reused buffer when `peer` and pymahjong is installed."""
    states = sample_states(games, stride, seed)
    out: dict[str, Any] = {"states": len(states), "repeats": repeats}
    for name, oracle, reps in (("public", False, repeats), ("oracle", True, max(1, repeats // 8))):
        c0 = time.process_time()
        for g, s in states:
            _mj.bench_encode(g, s, reps, oracle)
        out[f"meeple_{name}_native_obs_per_s"] = _per_s(
            len(states) * reps, time.process_time() - c0
        )
    buf = np.empty((_mj.PUBLIC_PLANES, 34), np.float32)
    calls = max(1, repeats // 100)
    c0 = time.process_time()
    for _ in range(calls):
        for g, s in states:
            _mj.encode_public(g, s, buf)
    out["meeple_public_python_obs_per_s"] = _per_s(len(states) * calls, time.process_time() - c0)
    if peer:
        out["pymahjong"] = _pymahjong_rates(games * 40, seed, calls)
    return out


def _pymahjong_rates(states: int, seed: int, calls: int) -> dict[str, Any]:
    try:
        import pymahjong
    except ImportError as e:
        return {"error": f"pymahjong not installed: {e}"}
    rng = random.Random(seed)
    env = pymahjong.MahjongEnv()
    arr = np.zeros((env.PLAYER_OBS_DIM + env.ORACLE_OBS_DIM, 34), np.int8)
    snaps = 0
    cpu = {False: 0.0, True: 0.0}
    while snaps < states:
        env.reset(oya=snaps % 4, game_wind="east")
        n = 0
        while not env.is_over():
            pid = env.get_curr_player_id()
            if n % 37 == 0:
                snaps += 1
                for oracle in (False, True):
                    c0 = time.process_time()
                    for _ in range(calls):
                        arr.fill(0)  # its encoder expects a zeroed buffer
                        pymahjong.encv1_encode_table(env.t, pid, oracle, arr)
                    cpu[oracle] += time.process_time() - c0
            env.step(pid, rng.choice(list(env.get_valid_actions())))
            n += 1
    return {
        "states": snaps,
        "public_93x34_python_obs_per_s": _per_s(snaps * calls, cpu[False]),
        "public_plus_oracle_111x34_python_obs_per_s": _per_s(snaps * calls, cpu[True]),
    }
