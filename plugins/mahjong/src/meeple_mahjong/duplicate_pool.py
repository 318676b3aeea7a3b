"""Pool paired duplicate summaries: python -m meeple_mahjong.duplicate_pool A.json B.json ...

One paired evaluation (``meeple_mahjong.duplicate --baseline ... --out``) can be split into shards
that run at once on several cores or machines (``--first-game``), and evaluations of the same
challenger and baseline on other walls (``--seed``) can be added to it. Each summary keeps its
samples (``per_index_rank`` of both sides), so the pooled test is the paired t-test over the
union of the (seed, game index) samples, exactly what one evaluation of all of them would
print. Summaries of different players, or that share a sample, are refused: the same walls
must not count twice.

Summaries without a baseline (``duplicate --challenger X --opponent O --out``) pool the same
way into the challenger's t-test against 2.5.

With ``--versus B.json ...`` the summaries' challenger is tested against B's challenger: two
players evaluated separately (``duplicate --challenger X --opponent O --seed S --out``), paired
over the walls both played.

With ``--across-runs`` the summaries' challengers (and baselines) may be different networks, e.g.
one recipe trained from two seeds, each evaluated on walls of its own: the samples pool as before
(each (seed, game index) once) and the players print as their list. The test then conditions on
those networks: it does not measure how much another training seed would differ.
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

from .duplicate import even_test, paired_line, paired_test, win_per_deal_in
from .tables import BOTS

_RATES = ("win_rate", "deal_in_rate", "riichi_rate", "call_rate")


class PoolError(MeepleError):
    """Summaries that cannot be pooled (one line: which file, what is wrong, what is accepted)."""


def _load(path: Path) -> dict[str, Any]:
    """A duplicate summary (``duplicate ... --out``), paired or not."""
    try:
        s = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise PoolError(f"{path}: not a readable JSON file ({err})") from None
    if not (isinstance(s, dict) and isinstance(s.get("challenger"), dict) and "per_index_rank" in s["challenger"]):
        raise PoolError(f"{path}: not a duplicate summary (it needs challenger.per_index_rank); write one with "
                        "python -m meeple_mahjong.duplicate ... --out")  # fmt: skip
    return s


def _require_paired(path: Path, s: dict[str, Any]) -> None:
    base = s.get("baseline")
    if not (isinstance(base, dict) and "per_index_rank" in base):
        raise PoolError(
            f"{path}: not a paired duplicate summary (it needs challenger.per_index_rank and "
            "baseline.per_index_rank); write one with python -m meeple_mahjong.duplicate --baseline ... --out"
        )
    if sorted(s["challenger"]["per_index_rank"]) != sorted(base["per_index_rank"]):
        raise PoolError(f"{path}: the challenger and the baseline played different game indices")


def players(s: dict[str, Any]) -> dict[str, Any]:
    """Who played in a summary: a network by its checkpoint file, a bot by its name."""
    return {
        "challenger": s.get("checkpoint") or s.get("challenger_bot"),
        "safe_challenger": bool(s.get("safe", False)),
        "baseline": (s.get("baseline_policy") or {}).get("checkpoint") or (s.get("baseline") or {}).get("player"),
        "opponent": (s.get("opponent_policy") or {}).get("checkpoint") or s.get("opponent_bot"),
        "east_only": bool(s.get("east_only", False)),
    }


def _digests(s: dict[str, Any]) -> dict[str, str | None]:
    """Each network's checkpoint SHA-256, where the summary records it (``duplicate`` does since
    2026-11-29; earlier summaries name a network by its path only)."""
    return {"challenger": s.get("checkpoint_sha256"),
            "baseline": (s.get("baseline_policy") or {}).get("checkpoint_sha256"),
            "opponent": (s.get("opponent_policy") or {}).get("checkpoint_sha256")}  # fmt: skip


def _differs(a: dict[str, Any], b: dict[str, Any], key: str) -> bool:
    """Whether summaries ``a`` and ``b`` name different ``key`` players: networks by content when
    both record the digest (one file copied to two run folders is one player), else by path;
    bots by name."""
    da, db = _digests(a).get(key), _digests(b).get(key)
    if da and db:
        return da != db
    return players(a)[key] != players(b)[key]


def _side(summaries: Sequence[dict[str, Any]], role: str, ranks: list[float]) -> dict[str, Any]:
    hands = sum(s[role]["hands"] for s in summaries)
    out: dict[str, Any] = {"games": sum(s[role]["games"] for s in summaries), "hands": hands,
                           "avg_rank": sum(ranks) / len(ranks)}  # fmt: skip
    for k in _RATES:  # per hand, so weighted by each summary's hands
        out[k] = sum(s[role][k] * s[role]["hands"] for s in summaries) / max(hands, 1)
    out["win_per_deal_in"] = win_per_deal_in(out["win_rate"], out["deal_in_rate"])  # the hands cancel
    return out


_PER_RUN = ("challenger", "baseline")  # the players --across-runs lets differ between summaries


def _samples(paths: Sequence[Path], summaries: Sequence[dict[str, Any]], same: Sequence[str],
             across_runs: bool = False) -> dict[tuple[int, int], tuple[Path, str]]:  # fmt: skip
    """{(seed, game index): (its summary, the index's key)} over summaries whose ``same`` players
    agree with the first's (but the challenger and baseline, ``across_runs``); a sample held twice
    is refused."""
    same = [k for k in same if not (across_runs and k in _PER_RUN)]
    who = players(summaries[0])
    owner: dict[tuple[int, int], tuple[Path, str]] = {}
    for path, s in zip(paths, summaries, strict=True):
        other = players(s)
        for key in same:
            if _differs(summaries[0], s, key):
                raise PoolError(
                    f"{path}: its {key} is {other[key]!r}, {paths[0]}'s is {who[key]!r}; "
                    f"pool summaries of the same {', '.join(same)}"
                )
        seed = int(s.get("seed", 0))
        for g in s["challenger"]["per_index_rank"]:
            sample = (seed, int(g))
            if sample in owner:
                raise PoolError(
                    f"{owner[sample][0]} and {path} both hold game index {g} of seed {seed}: the same "
                    "walls would count twice; pool shards of other indices (--first-game) or seeds"
                )
            owner[sample] = (Path(path), g)
    return owner


def _by_seed(samples: Sequence[tuple[int, int]]) -> dict[str, int]:
    seeds: dict[str, int] = {}
    for seed, _ in samples:
        seeds[str(seed)] = seeds.get(str(seed), 0) + 1
    return seeds


def _names(summaries: Sequence[dict[str, Any]], key: str) -> str:
    """The ``key`` players of the summaries, each once, in order (one name without --across-runs)."""
    return " + ".join(dict.fromkeys(str(players(s)[key]) for s in summaries))


def _rank(summaries: dict[Path, dict[str, Any]], role: str, where: tuple[Path, str]) -> float:
    return summaries[where[0]][role]["per_index_rank"][where[1]]


def pool(paths: Sequence[Path], across_runs: bool = False) -> dict[str, Any]:
    """The pooled comparison of the summaries at ``paths`` (PoolError: one clear line): paired
    when the first has a baseline (then all must), else :func:`_solo`."""
    paths = [Path(p) for p in paths]
    loaded = {p: _load(p) for p in paths}
    if "baseline" not in loaded[paths[0]]:
        return _solo(paths, loaded, across_runs)
    for path, s in loaded.items():
        _require_paired(path, s)
    summaries = list(loaded.values())
    owner = _samples(paths, summaries, ("challenger", "safe_challenger", "baseline", "opponent", "east_only"),
                     across_runs)
    xa = [_rank(loaded, "challenger", w) for w in owner.values()]
    xb = [_rank(loaded, "baseline", w) for w in owner.values()]
    return {
        "summaries": [str(p) for p in paths],
        "players": {**players(summaries[0]), **{k: _names(summaries, k) for k in _PER_RUN}},
        "game_indices": len(xa),
        "indices_by_seed": _by_seed(list(owner)),
        "challenger": _side(summaries, "challenger", xa),
        "baseline": _side(summaries, "baseline", xb),
        "paired": paired_test(xa, xb),
    }


def _solo(paths: Sequence[Path], loaded: dict[Path, dict[str, Any]], across_runs: bool = False) -> dict[str, Any]:
    """Shards of one challenger-only evaluation (``duplicate --challenger X --opponent O --out``,
    no baseline) pooled: the challenger's side and the t-test of its per-index ranks against 2.5
    (``vs_even``), what one evaluation of all the samples would print."""
    summaries = list(loaded.values())
    owner = _samples(paths, summaries, ("challenger", "safe_challenger", "opponent", "east_only"), across_runs)
    ranks = [_rank(loaded, "challenger", w) for w in owner.values()]
    who = {**players(summaries[0]), "challenger": _names(summaries, "challenger")}
    return {
        "summaries": [str(p) for p in paths],
        "players": {k: who[k] for k in ("challenger", "opponent", "east_only")},
        "game_indices": len(ranks),
        "indices_by_seed": _by_seed(list(owner)),
        "challenger": _side(summaries, "challenger", ranks),
        "vs_even": even_test(ranks),
    }


def versus(paths_a: Sequence[Path], paths_b: Sequence[Path], across_runs: bool = False) -> dict[str, Any]:
    """A's challenger against B's, each from its own evaluations (``--out`` of
    ``duplicate --challenger``, baseline or not) on the same walls: the paired test over the
    (seed, game index) samples, which both sides must hold alike. The result's ``challenger`` is
    A's, its ``baseline`` B's challenger."""
    sides = []
    for paths in (paths_a, paths_b):
        paths = [Path(p) for p in paths]
        loaded = {p: _load(p) for p in paths}
        owner = _samples(paths, list(loaded.values()), ("challenger", "safe_challenger", "opponent", "east_only"),
                         across_runs)
        sides.append((paths, loaded, owner))
    (pa, la, oa), (pb, lb, ob) = sides
    a, b = players(la[pa[0]]), players(lb[pb[0]])
    for key in ("opponent", "east_only"):
        if _differs(la[pa[0]], lb[pb[0]], key):
            raise PoolError(f"{pb[0]}: its {key} is {b[key]!r}, {pa[0]}'s is {a[key]!r}; "
                            "compare challengers that played the same opponents and rules")  # fmt: skip
    if set(oa) != set(ob):
        seed, g = sorted(set(oa) ^ set(ob))[0]
        raise PoolError(f"the two sides hold different walls ({len(set(oa) ^ set(ob))} samples differ, e.g. game "
                        f"index {g} of seed {seed}); evaluate both on the same --seed, --games and --first-game")  # fmt: skip
    keys = sorted(oa)
    xa = [_rank(la, "challenger", oa[k]) for k in keys]
    xb = [_rank(lb, "challenger", ob[k]) for k in keys]
    return {
        "summaries": {"a": [str(p) for p in pa], "b": [str(p) for p in pb]},
        "players": {"challenger": _names(list(la.values()), "challenger"),
                    "baseline": _names(list(lb.values()), "challenger"), "opponent": a["opponent"],
                    "east_only": a["east_only"]},  # fmt: skip
        "game_indices": len(keys),
        "indices_by_seed": _by_seed(keys),
        "challenger": _side(list(la.values()), "challenger", xa),
        "baseline": _side(list(lb.values()), "challenger", xb),
        "paired": paired_test(xa, xb),
    }


def _fmt(side: dict[str, Any]) -> str:
    return (f"avg rank {side['avg_rank']:.3f}, win {side['win_rate']:.3f}, "
            f"deal-in {side['deal_in_rate']:.3f} (per hand), win/deal-in {side['win_per_deal_in']:.2f}")  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    p = OneLineParser(prog="python -m meeple_mahjong.duplicate_pool", description=__doc__.split("\n\n")[0])
    p.add_argument("summaries", type=Path, nargs="+", help="paired summaries (duplicate --baseline --out)")
    p.add_argument("--versus", type=Path, nargs="+", default=None, metavar="SUMMARY",
                   help="test the summaries' challenger against these summaries' challenger on the same walls "
                        "(no baseline needed)")  # fmt: skip
    p.add_argument("--across-runs", action="store_true",
                   help="the challengers (and baselines) may differ between summaries, e.g. one recipe's "
                        "training seeds, each on walls of its own; the test conditions on those networks")  # fmt: skip
    p.add_argument("--out", type=Path, default=None, help="write the pooled summary JSON here")
    p.add_argument("--readiness", action="store_true",
                   help="check the phase-2 readiness gate (duplicate --readiness) on the pooled challenger "
                        "of challenger-only shards against phase 1's gate; exit status 1 when a condition fails")  # fmt: skip
    a = p.parse_args(argv)
    try:
        pooled = (versus(a.summaries, a.versus, a.across_runs) if a.versus
                  else pool(a.summaries, a.across_runs))  # fmt: skip
        if a.readiness:
            _require_readiness_pool(pooled)
    except PoolError as err:
        print(f"meeple: error: {err}", file=sys.stderr)
        return 2
    seeds = ", ".join(f"{n} of seed {s}" for s, n in pooled["indices_by_seed"].items())
    files = len(a.summaries) + len(a.versus or ())
    print(f"{files} summaries, {pooled['game_indices']} game indices ({seeds})")
    who = pooled["players"]
    print(f"challenger {who['challenger']}: {_fmt(pooled['challenger'])}")
    if "vs_even" in pooled:
        even = pooled["vs_even"]
        print(f"vs 2.5 over {pooled['game_indices']} game indices: "
              + (f"t = {even['t']:.2f}, p = {even['p']:.3g} (t-test)" if even else "no test (too few indices)"))
    else:
        print(f"{'versus' if a.versus else 'baseline':<10} {who['baseline']}: {_fmt(pooled['baseline'])}")
        print(paired_line(pooled["paired"], b="versus" if a.versus else "baseline"))
    ready = True
    if a.readiness:
        from .readiness import report_readiness  # torch, through the core's gates

        pooled["readiness"] = report_readiness({**pooled["challenger"], "vs_even": pooled["vs_even"]})
        ready = pooled["readiness"]["passed"]
    if a.out:
        write_json_atomic(a.out, pooled)
        print(f"wrote {a.out}")
    return 0 if ready else 1


def _require_readiness_pool(pooled: dict[str, Any]) -> None:
    """--readiness reads a challenger against three copies of phase 1: shards of one
    challenger-only evaluation whose opponent is a network."""
    if "vs_even" not in pooled:
        raise PoolError("--readiness pools challenger-only shards (duplicate --challenger X --opponent <phase 1> "
                        "--out, no --baseline) without --versus")  # fmt: skip
    if pooled["players"]["opponent"] in BOTS:
        raise PoolError(f"--readiness: the opponent is the {pooled['players']['opponent']!r} bot; accepted: "
                        "summaries against phase 1's gate (a checkpoint or run directory)")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
