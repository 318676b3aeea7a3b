"""Riichi mahjong engine speed: meeple vs pymahjong and riichienv, uniform random legal play.

    python -m meeple.bench mahjong --out mahjong.json [--games 20] [--native-games 300]

Measured in one process, one core, one after the other:
- ``meeple``: full East-South games through the Python API (pending / legal_actions /
  step, the action drawn with ``random.choice``), games/hour and decisions/s;
- ``meeple-native``: the same play as a C++ loop (``Game.random_playout``, no Python per
  decision): games/hour/core;
- ``meeple-rule-bots``: full games with the native rule-based bot in every seat
  (``play_bots``, docs/mahjong_bots.md): games/hour/core;
- ``pymahjong``: single hands (its env plays one hand), hands/s and decisions/s;
- ``riichienv``: full East-South games (``4p-red-half``), games/hour and decisions/s.
Rates are per CPU second of the process (one core); wall-clock rates are saved too.
A peer that does not import is reported as missing. Ratios compare decisions/s (the only
unit all four share) and games/hour where both play full games.
"""

from __future__ import annotations

import argparse
import os
import random
import time
from pathlib import Path
from typing import Any

from meeple.bench.ppo import git_state, write_json_atomic


def _meeple_python(games: int, seed: int) -> dict[str, Any]:
    import meeple_mahjong as mj

    rng = random.Random(seed)
    g = mj.Game()
    g.set_record_events(False)
    decisions = 0
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(games):
        g.reset(seed, i)
        while not g.is_done():
            seat = g.pending()[0]
            g.step(seat, rng.choice(g.legal_actions(seat)))
            decisions += 1
    return _rates(games, decisions, time.perf_counter() - t0, time.process_time() - c0, "games")


def _meeple_native(games: int, seed: int) -> dict[str, Any]:
    import meeple_mahjong as mj

    g = mj.Game()
    g.set_record_events(False)
    decisions = 0
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(games):
        g.reset(seed, i)
        decisions += g.random_playout(seed * 1_000_003 + i)
    return _rates(games, decisions, time.perf_counter() - t0, time.process_time() - c0, "games")


def _meeple_rule_bots(games: int, seed: int) -> dict[str, Any]:
    import meeple_mahjong as mj

    g = mj.Game()
    g.set_record_events(False)
    decisions = 0
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(games):
        g.reset(seed, i)
        decisions += sum(mj.play_bots(g, ["rule"] * 4, i)["decisions"])
    return _rates(games, decisions, time.perf_counter() - t0, time.process_time() - c0, "games")


def _pymahjong(hands: int, seed: int) -> dict[str, Any]:
    import pymahjong

    rng = random.Random(seed)
    env = pymahjong.MahjongEnv()
    decisions = 0
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(hands):
        env.reset(oya=i % 4, game_wind="east")  # its seed argument is broken in 1.1.2
        while not env.is_over():
            pid = env.get_curr_player_id()
            env.step(pid, rng.choice(list(env.get_valid_actions())))
            decisions += 1
    return _rates(hands, decisions, time.perf_counter() - t0, time.process_time() - c0, "hands")


def _riichienv(games: int, seed: int) -> dict[str, Any]:
    from riichienv import RiichiEnv

    rng = random.Random(seed)
    decisions = 0
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(games):
        env = RiichiEnv(game_mode="4p-red-half", skip_mjai_logging=True, seed=seed + i)
        obs = env.reset()
        while not env.done():
            actions = {pid: rng.choice(o.legal_actions()) for pid, o in obs.items()}
            decisions += len(actions)
            obs = env.step(actions)
    return _rates(games, decisions, time.perf_counter() - t0, time.process_time() - c0, "games")


def _rates(n: int, decisions: int, wall: float, cpu: float, unit: str) -> dict[str, Any]:
    # Rates per CPU second of this (single-threaded) process: "per core", and far less
    # sensitive than wall time to other jobs on a shared machine (wall rates kept too).
    return {
        unit: n,
        "decisions": decisions,
        "wall_s": round(wall, 4),
        "cpu_s": round(cpu, 4),
        f"{unit}_per_hour": round(3600 * n / cpu, 1),
        "decisions_per_s": round(decisions / cpu, 1),
        f"{unit}_per_hour_wall": round(3600 * n / wall, 1),
    }


def _run(name: str, fn, *args) -> dict[str, Any]:
    try:
        return {"ok": True, **fn(*args)}
    except ImportError as e:
        return {"ok": False, "missing": f"{name} does not import: {e}"}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m meeple.bench mahjong", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--out", type=Path, default=Path("mahjong.json"), help="JSON results file")
    p.add_argument("--games", type=int, default=20, help="full games for the Python-API loops")
    p.add_argument("--native-games", type=int, default=300, help="full games for the C++ loop")
    p.add_argument("--bot-games", type=int, default=100, help="full games, rule bot in every seat")
    p.add_argument("--hands", type=int, default=200, help="pymahjong hands")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    for flag in ("games", "native_games", "bot_games", "hands"):
        if getattr(a, flag) < 1:
            p.error(f"--{flag.replace('_', '-')} must be >= 1")
    res = {
        "meeple": _run("meeple_mahjong", _meeple_python, a.games, a.seed),
        "meeple-native": _run("meeple_mahjong", _meeple_native, a.native_games, a.seed),
        "meeple-rule-bots": _run("meeple_mahjong", _meeple_rule_bots, a.bot_games, a.seed),
        "pymahjong": _run("pymahjong", _pymahjong, a.hands, a.seed),
        "riichienv": _run("riichienv", _riichienv, a.games, a.seed),
    }
    ratios: dict[str, float] = {}
    m = res["meeple"]
    if m["ok"]:
        for peer in ("pymahjong", "riichienv"):
            if res[peer]["ok"]:
                ratios[f"meeple/{peer} decisions_per_s"] = round(
                    m["decisions_per_s"] / res[peer]["decisions_per_s"], 3
                )
        if res["riichienv"]["ok"]:
            ratios["meeple/riichienv games_per_hour"] = round(
                m["games_per_hour"] / res["riichienv"]["games_per_hour"], 3
            )
    if res["meeple-native"]["ok"]:
        ratios["meeple-native games_per_hour / 1e6 goal"] = round(
            res["meeple-native"]["games_per_hour"] / 1e6, 3
        )
    payload = {
        "benchmark": "mahjong",
        "results": res,
        "ratios": ratios,
        "goals": {
            "meeple/pymahjong decisions_per_s": 4.0,
            "meeple/riichienv decisions_per_s": 1.3,
            "meeple-native games_per_hour": 1e6,
        },  # fmt: skip
        "load_average_1m": os.getloadavg()[0],
        "cpu_count": os.cpu_count(),
        "git": git_state(),
    }
    write_json_atomic(a.out, payload)
    for name, r in res.items():
        print(
            f"{name:14s} "
            + (
                ", ".join(f"{k}={v}" for k, v in r.items() if k != "ok")
                if r["ok"]
                else r["missing"]
            )
        )
    for k, v in ratios.items():
        print(f"{k}: {v}")
    print(f"wrote {a.out}")
    return 0
