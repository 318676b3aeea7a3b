"""Play games through the Python API and record, per decision, which kinds of action were legal.

The records let an outside rules implementation check our legality both ways (see
tools/mjai_check.py --legal): for every event after which a seat must decide, the flags
(can_discard, can_riichi, can_tsumo_agari, can_ron_agari, can_pon, can_daiminkan,
can_chi_low/mid/high, can_ankan, can_kakan, can_ryukyoku) our engine offered that seat.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from meeple_native import mahjong as _mj

from .mjai import write_log

FLAGS = (
    "can_discard", "can_riichi", "can_tsumo_agari", "can_ron_agari", "can_pon", "can_daiminkan",
    "can_chi_low", "can_chi_mid", "can_chi_high", "can_ankan", "can_kakan", "can_ryukyoku",
)  # fmt: skip


def flags_of(actions) -> dict[str, bool]:
    f = dict.fromkeys(FLAGS, False)
    for a in actions:
        t = a.type
        if t in ("discard", "riichi"):
            f["can_discard"] = True
        if t == "riichi":
            f["can_riichi"] = True
        elif t == "tsumo":
            f["can_tsumo_agari"] = True
        elif t == "ron":
            f["can_ron_agari"] = True
        elif t in ("pon", "daiminkan", "ankan", "kakan"):
            f[f"can_{t}"] = True
        elif t == "kyuushu":
            f["can_ryukyoku"] = True
        elif t == "chi":
            called = a.tile // 4
            low = min(c // 4 for c in a.consumed)
            f[
                "can_chi_low"
                if called < low
                else "can_chi_high"
                if called > low + 1
                else "can_chi_mid"
            ] = True
    return f


def _shanten_after(hand: list[int], tile: int) -> int:
    counts = [0] * 34
    for t in hand:
        counts[t // 4] += 1
    counts[tile // 4] -= 1
    return _mj.shanten(counts)


def play(seed: int, index: int, rng: random.Random, call_prob: float = 0.25, **rules):
    """One game of shanten-greedy players (win, riichi, random calls); returns (events, decisions)."""
    g = _mj.Game(**rules)
    g.reset(seed, index)
    decisions = []
    while not g.is_done():
        at = g.event_count - 1
        for seat in g.pending():
            decisions.append({"event": at, "seat": seat, "flags": flags_of(g.legal_actions(seat))})
        seat = g.pending()[0]
        legal = g.legal_actions(seat)
        by_type: dict[str, list] = {}
        for a in legal:
            by_type.setdefault(a.type, []).append(a)
        calls = [a for a in legal if a.type not in ("discard", "pass", "tsumo", "ron", "riichi")]
        if "tsumo" in by_type or "ron" in by_type:
            a = (by_type.get("tsumo") or by_type["ron"])[0]
        elif "riichi" in by_type and rng.random() < 0.8:
            a = rng.choice(by_type["riichi"])
        elif calls and rng.random() < call_prob:
            a = rng.choice(calls)
        elif "discard" in by_type:
            hand = g.hand(seat)
            scored = [
                (_shanten_after(hand, d.tile), rng.random(), i)
                for i, d in enumerate(by_type["discard"])
            ]
            a = by_type["discard"][min(scored)[2]]
        else:
            a = by_type.get("pass", legal)[0]
        g.step(seat, a)
    return g.events(), decisions


def dump(out: Path, games: int, seed: int, **rules) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    paths = []
    for i in range(games):
        events, decisions = play(seed, i, rng, **rules)
        log = write_log(out / f"game_{i:05d}.mjson", events)
        (out / f"game_{i:05d}.legal.json").write_text(json.dumps(decisions))
        paths.append(log)
    return paths
