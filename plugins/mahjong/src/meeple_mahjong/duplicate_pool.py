"""Pool paired duplicate summaries: python -m meeple_mahjong.duplicate_pool A.json B.json ...

One paired evaluation (``meeple_mahjong.duplicate --baseline ... --out``) can be split into shards
that run at once on several cores or machines (``--first-game``), and evaluations of the same
challenger and baseline on other walls (``--seed``) can be added to it. Each summary keeps its
samples (``per_index_rank`` of both sides), so the pooled test is the paired t-test over the
union of the (seed, game index) samples, exactly what one evaluation of all of them would
print. Summaries of different players, or that share a sample, are refused: the same walls
must not count twice.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from meeple.cli.parsing import OneLineParser
from meeple.errors import MeepleError
from meeple.jsonio import write_json_atomic

from .duplicate import paired_line, paired_test

_RATES = ("win_rate", "deal_in_rate", "riichi_rate", "call_rate")


class PoolError(MeepleError):
    """Summaries that cannot be pooled (one line: which file, what is wrong, what is accepted)."""


def _load(path: Path) -> dict[str, Any]:
    try:
        s = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise PoolError(f"{path}: not a readable JSON file ({err})") from None
    ch, base = (s.get("challenger"), s.get("baseline")) if isinstance(s, dict) else (None, None)
    if not (isinstance(ch, dict) and isinstance(base, dict) and "per_index_rank" in ch and "per_index_rank" in base):
        raise PoolError(
            f"{path}: not a paired duplicate summary (it needs challenger.per_index_rank and "
            "baseline.per_index_rank); write one with python -m meeple_mahjong.duplicate --baseline ... --out"
        )
    if sorted(ch["per_index_rank"]) != sorted(base["per_index_rank"]):
        raise PoolError(f"{path}: the challenger and the baseline played different game indices")
    return s


def players(s: dict[str, Any]) -> dict[str, Any]:
    """Who played in a summary: a network by its checkpoint file, a bot by its name."""
    return {
        "challenger": s.get("checkpoint") or s.get("challenger_bot"),
        "safe_challenger": bool(s.get("safe", False)),
        "baseline": (s.get("baseline_policy") or {}).get("checkpoint") or s["baseline"].get("player"),
        "opponent": (s.get("opponent_policy") or {}).get("checkpoint") or s.get("opponent_bot"),
        "east_only": bool(s.get("east_only", False)),
    }


def _side(summaries: Sequence[dict[str, Any]], role: str, ranks: list[float]) -> dict[str, Any]:
    hands = sum(s[role]["hands"] for s in summaries)
    out: dict[str, Any] = {"games": sum(s[role]["games"] for s in summaries), "hands": hands,
                           "avg_rank": sum(ranks) / len(ranks)}  # fmt: skip
    for k in _RATES:  # per hand, so weighted by each summary's hands
        out[k] = sum(s[role][k] * s[role]["hands"] for s in summaries) / max(hands, 1)
    return out


def pool(paths: Sequence[Path]) -> dict[str, Any]:
    """The pooled paired comparison of the summaries at ``paths`` (PoolError: one clear line)."""
    summaries = [_load(Path(p)) for p in paths]
    who = players(summaries[0])
    owner: dict[tuple[int, int], Path] = {}  # (seed, game index) -> the summary that holds it
    xa: list[float] = []
    xb: list[float] = []
    for path, s in zip(paths, summaries, strict=True):
        other = players(s)
        for key, value in who.items():
            if other[key] != value:
                raise PoolError(
                    f"{path}: its {key} is {other[key]!r}, {paths[0]}'s is {value!r}; "
                    "pool summaries of the same challenger, baseline, opponents and rules"
                )
        seed = int(s.get("seed", 0))
        for g, rank in s["challenger"]["per_index_rank"].items():
            sample = (seed, int(g))
            if sample in owner:
                raise PoolError(
                    f"{owner[sample]} and {path} both hold game index {g} of seed {seed}: the same "
                    "walls would count twice; pool shards of other indices (--first-game) or seeds"
                )
            owner[sample] = Path(path)
            xa.append(rank)
            xb.append(s["baseline"]["per_index_rank"][g])
    seeds: dict[str, int] = {}
    for seed, _ in owner:
        seeds[str(seed)] = seeds.get(str(seed), 0) + 1
    return {
        "summaries": [str(p) for p in paths],
        "players": who,
        "game_indices": len(xa),
        "indices_by_seed": seeds,
        "challenger": _side(summaries, "challenger", xa),
        "baseline": _side(summaries, "baseline", xb),
        "paired": paired_test(xa, xb),
    }


def _fmt(side: dict[str, Any]) -> str:
    return (f"avg rank {side['avg_rank']:.3f}, win {side['win_rate']:.3f}, "
            f"deal-in {side['deal_in_rate']:.3f} (per hand)")  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    p = OneLineParser(prog="python -m meeple_mahjong.duplicate_pool", description=__doc__.split("\n\n")[0])
    p.add_argument("summaries", type=Path, nargs="+", help="paired summaries (duplicate --baseline --out)")
    p.add_argument("--out", type=Path, default=None, help="write the pooled summary JSON here")
    a = p.parse_args(argv)
    try:
        pooled = pool(a.summaries)
    except PoolError as err:
        print(f"meeple: error: {err}", file=sys.stderr)
        return 2
    seeds = ", ".join(f"{n} of seed {s}" for s, n in pooled["indices_by_seed"].items())
    print(f"{len(a.summaries)} summaries, {pooled['game_indices']} game indices ({seeds})")
    who = pooled["players"]
    print(f"challenger {who['challenger']}: {_fmt(pooled['challenger'])}")
    print(f"baseline   {who['baseline']}: {_fmt(pooled['baseline'])}")
    print(paired_line(pooled["paired"]))
    if a.out:
        write_json_atomic(a.out, pooled)
        print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
