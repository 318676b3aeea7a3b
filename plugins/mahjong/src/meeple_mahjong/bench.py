"""Riichi mahjong speed: the engine, the encoder, the batch simulator and the rule bot, each
next to pymahjong (and riichienv) measured in the same run.

    python -m meeple.bench mahjong --out mahjong.json [--games 20] [--native-games 300]

(entry point ``meeple.benchmarks: mahjong`` in this plugin's pyproject.toml)

Measured in one process, one core, one after the other:
- ``meeple``: full East-South games through the Python API (pending / legal_actions /
  step, the action drawn with ``random.choice``), games/hour and decisions/s;
- ``meeple-native``: the same play as a C++ loop (``Game.random_playout``, no Python per
  decision): games/hour/core;
- ``meeple-rule-bots``: full games with the native rule-based bot in every seat
  (``play_bots``, docs/mahjong_bots.md): games/hour/core;
- ``pymahjong``: single hands (its env plays one hand), hands/s and decisions/s;
- ``riichienv``: full East-South games (``4p-red-half``), games/hour and decisions/s;
- ``meeple-encoder``: 84x34 observations/s (native loop and one Python call each) beside
  pymahjong's 93x34 encoder (``meeple_mahjong.encode_speed``);
- ``meeple-corpus``: training samples/s/core from self-play MJAI logs to batches (``raw``:
  replay + encode each decision) and from built shards to batches (``shards``: decompress,
  shuffle, suit permutation, decode), beside the encoder's native rate
  (``meeple_mahjong.corpus.speed``; goals 20k and 200k samples/s/core);
- ``meeple-batch-B{1,64,512}``: the batch simulator, learner in every seat, trivial policy
  (first legal index), learner decisions/s with their observations, next to
  ``pymahjong-with-obs``: pymahjong stepping with the actor's observation encoded each decision.
Rates are per CPU second of the process (one core); wall-clock rates are saved too.
A peer that does not import is reported as missing. Ratios compare decisions/s (the only
unit all share) and games/hour where both play full games.
"""

from __future__ import annotations

import argparse
import os
import random
import time
from pathlib import Path
from typing import Any

import numpy as np

import meeple_mahjong as mj
from meeple.jsonio import write_json_atomic
from meeple.provenance import git_state


def _meeple_python(games: int, seed: int) -> dict[str, Any]:
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


def _native_games(games: int, seed: int, play) -> dict[str, Any]:
    """Whole games played in C++ by ``play(game, i) -> decisions``."""
    g = mj.Game()
    g.set_record_events(False)
    decisions = 0
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(games):
        g.reset(seed, i)
        decisions += play(g, i)
    return _rates(games, decisions, time.perf_counter() - t0, time.process_time() - c0, "games")


def _meeple_native(games: int, seed: int) -> dict[str, Any]:
    return _native_games(games, seed, lambda g, i: g.random_playout(seed * 1_000_003 + i))


def _meeple_rule_bots(games: int, seed: int) -> dict[str, Any]:
    return _native_games(
        games, seed, lambda g, i: sum(mj.play_bots(g, ["rule"] * 4, i)["decisions"])
    )


BATCH_SIZES = (1, 64, 512)


def _encoder(seed: int) -> dict[str, Any]:
    from meeple_mahjong.encode_speed import encoder_rates

    return encoder_rates(seed=seed)


def _corpus(games: int, seed: int) -> dict[str, Any]:
    from meeple_mahjong.corpus.speed import corpus_rates

    return corpus_rates(games=games, seed=seed)


def sim_buffers(slots: int) -> dict[str, Any]:
    """The arrays ``BatchSim.reset``/``step`` write for ``slots`` learner slots."""
    return dict(obs=np.empty((slots, 84, 34), np.float32), mask=np.empty((slots, mj.NUM_ACTIONS), np.uint8),
                active=np.empty(slots, np.uint8), reward=np.empty(slots, np.float32),
                done=np.empty(slots, np.uint8))  # fmt: skip


def _batch_sim(tables: int, decisions: int, seed: int) -> dict[str, Any]:
    """The batch simulator with the learner in all four seats and a trivial policy (the first
    legal index): learner decisions per CPU second, each with its 84x34 observation encoded."""
    sim = mj.BatchSim(tables, mj.Game(), session_seed=seed, learner_seats=[0, 1, 2, 3], threads=1)
    out = sim_buffers(sim.num_slots)
    sim.reset(None, **out)
    made = steps = 0
    t0, c0 = time.perf_counter(), time.process_time()
    while made < decisions:
        made += int(out["active"].sum())
        sim.step(out["mask"].argmax(1).astype(np.int64), **out)
        steps += 1
        if out["done"].any():
            sim.reset(out["done"].reshape(tables, 4).any(1).astype(np.uint8), **out)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"tables": tables, "calls": steps, "decisions": made, "games": sim.games_finished,
            "cpu_s": round(cpu, 4), "wall_s": round(wall, 4),
            "decisions_per_s": round(made / cpu, 1), "decisions_per_s_wall": round(made / wall, 1)}  # fmt: skip


def _pymahjong_with_obs(hands: int, seed: int) -> dict[str, Any]:
    """pymahjong stepping one table from Python with the acting seat's observation (93x34)
    encoded at every decision: the peer of the batch simulator's per-decision work."""
    import pymahjong

    rng = random.Random(seed)
    env = pymahjong.MahjongEnv()
    obs = np.zeros((env.PLAYER_OBS_DIM, 34), np.int8)
    decisions = 0
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(hands):
        env.reset(oya=i % 4, game_wind="east")
        while not env.is_over():
            pid = env.get_curr_player_id()
            obs.fill(0)
            pymahjong.encv1_encode_table(env.t, pid, False, obs)
            env.step(pid, rng.choice(list(env.get_valid_actions())))
            decisions += 1
    return _rates(hands, decisions, time.perf_counter() - t0, time.process_time() - c0, "hands")


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
    """riichi mahjong engine: games/hour and decisions/s vs pymahjong and riichienv (random play)"""
    p = argparse.ArgumentParser(
        prog="python -m meeple.bench mahjong", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--out", type=Path, default=Path("mahjong.json"), help="JSON results file")
    p.add_argument("--games", type=int, default=20, help="full games for the Python-API loops")
    p.add_argument("--native-games", type=int, default=300, help="full games for the C++ loop")
    p.add_argument("--bot-games", type=int, default=100, help="full games, rule bot in every seat")
    p.add_argument("--hands", type=int, default=200, help="pymahjong hands")
    p.add_argument("--batch-decisions", type=int, default=40_000,
                   help="learner decisions per batch-simulator size (B = 1, 64, 512)")  # fmt: skip
    p.add_argument("--corpus-games", type=int, default=20,
                   help="self-play games whose logs and shards the corpus rows read")  # fmt: skip
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    for flag in ("games", "native_games", "bot_games", "hands", "batch_decisions", "corpus_games"):
        if getattr(a, flag) < 1:
            p.error(f"--{flag.replace('_', '-')} must be >= 1")
    res = {
        "meeple": _run("meeple_mahjong", _meeple_python, a.games, a.seed),
        "meeple-native": _run("meeple_mahjong", _meeple_native, a.native_games, a.seed),
        "meeple-rule-bots": _run("meeple_mahjong", _meeple_rule_bots, a.bot_games, a.seed),
        "pymahjong": _run("pymahjong", _pymahjong, a.hands, a.seed),
        "riichienv": _run("riichienv", _riichienv, a.games, a.seed),
        "meeple-encoder": _run("meeple_mahjong", _encoder, a.seed),
        "meeple-corpus": _run("meeple_mahjong", _corpus, a.corpus_games, a.seed),
        **{
            f"meeple-batch-B{b}": _run("meeple_mahjong", _batch_sim, b, a.batch_decisions, a.seed)
            for b in BATCH_SIZES
        },  # fmt: skip
        "pymahjong-with-obs": _run("pymahjong", _pymahjong_with_obs, a.hands, a.seed),
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
    enc = res["meeple-encoder"]
    if enc["ok"]:
        ratios["meeple encoder obs_per_s / 200k goal"] = round(
            enc["meeple_public_native_obs_per_s"] / 2e5, 3
        )
        peer = enc.get("pymahjong", {}).get("public_93x34_python_obs_per_s")
        if peer:
            ratios["meeple/pymahjong encoder obs_per_s (native loop)"] = round(
                enc["meeple_public_native_obs_per_s"] / peer, 3
            )
            ratios["meeple/pymahjong encoder obs_per_s (one Python call each)"] = round(
                enc["meeple_public_python_obs_per_s"] / peer, 3
            )
    corpus = res["meeple-corpus"]
    if corpus["ok"]:
        from meeple_mahjong.corpus.speed import RAW_GOAL, SHARDS_GOAL

        for kind, goal in (("raw", RAW_GOAL), ("shards", SHARDS_GOAL)):
            rate = corpus[f"{kind}_samples_per_s"]
            ratios[f"corpus {kind} samples_per_s / {goal // 1000}k goal"] = round(rate / goal, 3)
            if enc["ok"]:
                ratios[f"corpus {kind} samples_per_s / encoder native obs_per_s"] = round(
                    rate / enc["meeple_public_native_obs_per_s"], 3
                )
    if res["pymahjong-with-obs"]["ok"]:
        for b in BATCH_SIZES:
            r = res[f"meeple-batch-B{b}"]
            if r["ok"]:
                ratios[f"meeple-batch-B{b}/pymahjong-with-obs decisions_per_s"] = round(
                    r["decisions_per_s"] / res["pymahjong-with-obs"]["decisions_per_s"], 3
                )
    if res["meeple-rule-bots"]["ok"] and res["pymahjong"]["ok"]:
        # pymahjong has no built-in bot: its random play (single hands) is the nearest number.
        ratios["meeple-rule-bots games_per_hour vs pymahjong random hands_per_hour"] = round(
            res["meeple-rule-bots"]["games_per_hour"] / res["pymahjong"]["hands_per_hour"], 3
        )
    payload = {
        "benchmark": "mahjong",
        "results": res,
        "ratios": ratios,
        "goals": {
            "meeple/pymahjong decisions_per_s": 4.0,
            "meeple/riichienv decisions_per_s": 1.3,
            "meeple-native games_per_hour": 1e6,
            "meeple encoder obs_per_s": 2e5,
            "corpus raw samples_per_s": 2e4,
            "corpus shards samples_per_s": 2e5,
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


if __name__ == "__main__":
    raise SystemExit(main())
