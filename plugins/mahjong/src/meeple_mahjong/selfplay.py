"""Self-play to MJAI logs: python -m meeple_mahjong.selfplay --games N --seed S --out DIR.

Each game i is a pure function of (seed, i, rules) and the policy seed i; logs go to
DIR/game_00000.mjson[.gz] and a summary to DIR/summary.json. With --verify every win is
re-scored by the `mahjong` package and compared with the score change the engine applied.

Policies: `greedy` and `random` (the engine's built-in playouts), or the native bots
(docs/mahjong_bots.md): `--policy rule` seats four rule bots, `--bots rule,rule,random,rule`
names one bot per seat. Bot games carry the bot names as the players' names in `start_game`,
so a corpus built from them (meeple_mahjong.corpus) clones those bots.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

from meeple.cli_progress import task_progress
from meeple_native import mahjong as _mj

from .mjai import placements, write_log


def _args(argv):
    p = argparse.ArgumentParser(
        prog="python -m meeple_mahjong.selfplay", description=__doc__.splitlines()[0]
    )
    p.add_argument("--games", type=int, required=True, help="number of games")
    p.add_argument("--seed", type=int, default=0, help="session seed (walls derive from it)")
    p.add_argument("--out", type=Path, required=True, help="output directory")
    p.add_argument("--policy", choices=("greedy", "random", *_mj.bot_names()), default="greedy",
                   help="greedy: wins, riichi, shanten-lowering discards; random: uniform legal; "
                        "a bot name: that native bot in all four seats")  # fmt: skip
    p.add_argument("--bots", default=None,
                   help="one native bot per seat, comma-separated (e.g. rule,rule,random,rule); "
                        f"accepted names: {', '.join(_mj.bot_names())}")  # fmt: skip
    p.add_argument(
        "--call-prob", type=float, default=0.3, help="greedy policy: chance of taking a call"
    )
    p.add_argument("--east-only", action="store_true", help="East-only games (default East-South)")
    p.add_argument("--no-red", action="store_true", help="no red fives")
    p.add_argument("--gzip", action="store_true", help="write .mjson.gz")
    p.add_argument(
        "--verify", action="store_true", help="re-score every win with the mahjong package"
    )
    a = p.parse_args(argv)
    if a.games < 1:
        p.error(f"--games must be >= 1, got {a.games}")
    if not 0.0 <= a.call_prob <= 1.0:
        p.error(f"--call-prob must be in [0, 1], got {a.call_prob}")
    a.seat_bots = None
    if a.bots is not None:
        a.seat_bots = [b.strip() for b in a.bots.split(",")]
        bad = [b for b in a.seat_bots if b not in _mj.bot_names()]
        if len(a.seat_bots) != 4 or bad:
            p.error(
                f"--bots needs 4 comma-separated bot names, got {a.bots!r}; "
                f"accepted: {', '.join(_mj.bot_names())}"
            )
    elif a.policy in _mj.bot_names():
        a.seat_bots = [a.policy] * 4
    return a


def _named(events: list[str], names: list[str]) -> list[str]:
    """The stream with the players' names in start_game."""
    first = json.loads(events[0])
    first["names"] = names
    return [json.dumps(first, separators=(",", ":")), *events[1:]]


def main(argv=None) -> int:
    a = _args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    rules = {"east_only": a.east_only, "red_fives": not a.no_red}
    if a.verify:
        from .peers import peer_deltas
    g = _mj.Game(**rules)
    stats: Counter = Counter()
    ranks = [[0] * 4 for _ in range(4)]
    mismatches = []
    t0 = time.perf_counter()
    with task_progress() as bar:
        task = bar.add_task("self-play", total=a.games)
        for i in range(a.games):
            g.reset(a.seed, i)
            if a.seat_bots is not None:
                stats["decisions"] += sum(_mj.play_bots(g, a.seat_bots, i)["decisions"])
            elif a.policy == "greedy":
                stats["decisions"] += g.greedy_playout(i, a.call_prob)
            else:
                stats["decisions"] += g.random_playout(i)
            stats["hands"] += g.hands_played
            wins = g.wins()
            stats["wins"] += len(wins)
            for w in wins:
                if a.verify:
                    peer, deltas = peer_deltas(w, rules["red_fives"])
                    if not peer["ok"] or deltas != list(w["deltas"]):
                        mismatches.append(
                            {"game": i, "win": w, "peer": peer, "peer_deltas": deltas}
                        )
            for seat, rank in enumerate(placements(g.scores)):
                ranks[seat][rank] += 1
            name = f"game_{i:05d}.mjson" + (".gz" if a.gzip else "")
            events = g.events()
            write_log(a.out / name, events if a.seat_bots is None else _named(events, a.seat_bots))
            bar.advance(task)
    seconds = time.perf_counter() - t0
    summary = {
        "games": a.games,
        "seed": a.seed,
        "policy": a.policy if a.seat_bots is None else ",".join(a.seat_bots),
        "rules": rules,
        "hands": stats["hands"],
        "wins": stats["wins"],
        "decisions": stats["decisions"],
        "seconds": round(seconds, 3),
        "rank_counts_by_seat": ranks,
        "verified": a.verify,
        "score_mismatches": len(mismatches),
    }
    (a.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if mismatches:
        (a.out / "mismatches.json").write_text(json.dumps(mismatches, indent=1) + "\n")
    print(json.dumps(summary))
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
