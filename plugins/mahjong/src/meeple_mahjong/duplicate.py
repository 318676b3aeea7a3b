"""1v3 duplicate evaluation: python -m meeple_mahjong.duplicate --challenger rule --opponent random.

A trained policy plays as ``policy``: ``--challenger policy --checkpoint RUN_DIR_OR_PT``
(meeple_mahjong.policy: the batch simulator with explicit games, one forward per step).

Protocol (docs/mahjong_bots.md): for every game index g the same walls (session seed, g) are
played four times, the challenger rotated through seats 0-3 and the opponent in the other
three. The players' randomness comes from per-seat streams seeded by (policy seed of g,
seat), the same in all four rotations, so the rotations differ only in who sits where:
luck of the walls cancels out, and a player against copies of itself ranks exactly 2.5.

The bookkeeping is independent of how games are played: `run_duplicate` hands batches of
`GameJob`s to a `Table` (meeple_mahjong.tables: `BotTable` for the built-in bots,
`meeple_mahjong.policy.PolicyTable` for learned policies) and adds up its `SeatResult`s in
`DuplicateStats`.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn

from meeple.cli.parsing import OneLineParser
from meeple.cli_progress import task_progress
from meeple.errors import MeepleError
from meeple.jsonio import write_json_atomic
from meeple_native import mahjong as _mj

from .tables import BOTS, BotTable, GameJob, SeatResult, Table

_POLICY_SALT = 0x0B075EED  # policy seeds must not coincide with wall keys


def policy_seed(seed: int, game_index: int) -> int:
    """Seed of game `game_index`'s seat streams: one per game, shared by its four rotations."""
    return _mj.game_key(seed ^ _POLICY_SALT, game_index)


def rotations(
    seed: int, game_index: int, challenger: str, opponent: str
) -> list[tuple[int, GameJob]]:
    """The four jobs of one game index: (challenger seat, job)."""
    ps = policy_seed(seed, game_index)
    jobs = []
    for seat in range(4):
        players = tuple(challenger if s == seat else opponent for s in range(4))
        jobs.append((seat, GameJob(seed, game_index, players, ps)))  # type: ignore[arg-type]
    return jobs


@dataclass
class _Side:
    """Sums over the seats of one side (the challenger, or the three opponents)."""

    games: int = 0
    rank_counts: list[int] = field(default_factory=lambda: [0, 0, 0, 0])
    score: int = 0
    hands: int = 0
    wins: int = 0
    tsumo: int = 0
    deal_ins: int = 0
    riichi: int = 0
    calls: int = 0

    def add(self, r: SeatResult) -> None:
        self.games += 1
        self.rank_counts[r.rank - 1] += 1
        self.score += r.score
        self.hands += r.hands
        for k in ("wins", "tsumo", "deal_ins", "riichi", "calls"):
            setattr(self, k, getattr(self, k) + getattr(r, k))

    def summary(self) -> dict[str, Any]:
        n, h = max(self.games, 1), max(self.hands, 1)
        return {
            "games": self.games,
            "hands": self.hands,
            "avg_rank": sum((i + 1) * c for i, c in enumerate(self.rank_counts)) / n,
            "rank_rates": [c / n for c in self.rank_counts],
            "first_rate": self.rank_counts[0] / n,
            "avg_score": self.score / n,
            "win_rate": self.wins / h,
            "tsumo_rate": self.tsumo / h,
            "deal_in_rate": self.deal_ins / h,
            "win_per_deal_in": win_per_deal_in(self.wins, self.deal_ins),
            "riichi_rate": self.riichi / h,
            "call_rate": self.calls / h,
        }


def win_per_deal_in(wins: float, deal_ins: float) -> float:
    """Hands won per hand dealt into, from counts or per-hand rates (the readiness gate asks
    >= 1.5): inf with wins and no deal-in, nan with neither (a gate on it then fails)."""
    if deal_ins:
        return wins / deal_ins
    return math.inf if wins else math.nan


def mean_ci95(xs: Sequence[float]) -> tuple[float, float]:
    """Mean and the half-width of its normal-approximation 95% interval (nan for n < 2)."""
    n = len(xs)
    if n == 0:
        return math.nan, math.nan
    m = sum(xs) / n
    if n < 2:
        return m, math.nan
    var = sum((x - m) ** 2 for x in xs) / (n - 1)
    return m, 1.96 * math.sqrt(var / n)


class DuplicateStats:
    """Accumulates duplicate results: the challenger's seat in each game, the rest opponents.

    The confidence interval of the average rank treats game indices as the independent
    samples (the four rotations of one index share walls, so they are not independent).
    """

    def __init__(self) -> None:
        self.challenger = _Side()
        self.opponents = _Side()
        self._rank_by_index: dict[int, list[int]] = {}

    def add(self, game_index: int, challenger_seat: int, results: Sequence[SeatResult]) -> None:
        if not 0 <= challenger_seat < 4 or len(results) != 4:
            raise ValueError(
                f"add: challenger_seat must be 0..3 and results 4 seats, "
                f"got seat {challenger_seat} and {len(results)} results"
            )
        for s, r in enumerate(results):
            (self.challenger if s == challenger_seat else self.opponents).add(r)
        self._rank_by_index.setdefault(game_index, []).append(results[challenger_seat].rank)

    def per_index(self) -> dict[int, float]:
        """The challenger's mean rank over the rotations of each game index (the samples)."""
        return {g: sum(v) / len(v) for g, v in sorted(self._rank_by_index.items())}

    def summary(self) -> dict[str, Any]:
        by_index = self.per_index()
        per_index = list(by_index.values())
        mean, half = mean_ci95(per_index)
        ch = self.challenger.summary()
        ch["avg_rank_ci95"] = None if math.isnan(half) else [mean - half, mean + half]
        ch["vs_even"] = even_test(per_index)
        # The test's samples by game index: two evaluations on the same walls can pair later.
        ch["per_index_rank"] = {str(g): r for g, r in by_index.items()}
        return {
            "game_indices": len(self._rank_by_index),
            "challenger": ch,
            "opponents": self.opponents.summary(),
        }


def even_test(per_index: Sequence[float]) -> dict[str, float] | None:
    """Is the challenger's average rank different from 2.5 (as good as its opponents)?

    A t-test of the per-index mean ranks against 2.5: the four rotations of an index share
    walls, so each index is one sample (a paired design: the opponents played the same walls
    from the other seats). None for fewer than 2 indices or no variation.
    """
    from scipy import stats

    xs = list(per_index)
    if len(xs) < 2 or max(xs) == min(xs):
        return None
    t, p = stats.ttest_1samp(xs, 2.5)
    return {"t": float(t), "p": float(p), "n": len(xs)}


def paired_comparison(a: DuplicateStats, b: DuplicateStats) -> dict[str, Any]:
    """Two challengers on the same game indices against the same opponents: the paired test
    (:func:`paired_test`) of their per-index mean ranks. Only indices both played count."""
    ra, rb = a.per_index(), b.per_index()
    common = sorted(set(ra) & set(rb))
    return paired_test([ra[g] for g in common], [rb[g] for g in common])


def paired_test(xa: Sequence[float], xb: Sequence[float]) -> dict[str, Any]:
    """The paired t-test (scipy's ttest_rel) of two challengers' mean ranks on the same samples
    (game indices), and the mean difference a - b with its 95% interval (negative: a ranks
    better)."""
    from scipy import stats

    if len(xa) < 2 or len(xa) != len(xb):
        raise ValueError(f"a paired comparison needs >= 2 shared game indices, got {min(len(xa), len(xb))}")
    diff = [x - y for x, y in zip(xa, xb, strict=True)]
    mean, half = mean_ci95(diff)
    out: dict[str, Any] = {"n": len(diff), "mean_diff": mean,
                           "diff_ci95": None if math.isnan(half) else [mean - half, mean + half]}
    if max(diff) == min(diff):  # identical play on every index: nothing to test
        out.update(t=None, p=1.0 if mean == 0 else 0.0)
    else:
        t, p = stats.ttest_rel(xa, xb)
        out.update(t=float(t), p=float(p))
    return out


def paired_line(paired: dict[str, Any], a: str = "challenger", b: str = "baseline") -> str:
    """One line for a :func:`paired_test` result of ``a`` against ``b``."""
    dci = paired["diff_ci95"]
    return (
        f"paired over {paired['n']} game indices: {a} - {b} avg rank {paired['mean_diff']:+.3f}"
        + (f" (95% CI {dci[0]:+.3f} to {dci[1]:+.3f})" if dci else "")
        + f", p = {paired['p']:.3g} (paired t-test)"
    )


def run_duplicate(
    table: Table,
    challenger: str,
    opponent: str,
    games: int,
    seed: int,
    *,
    first_game: int = 0,
    chunk: int = 8,
    on_progress: Callable[[int], None] | None = None,
) -> DuplicateStats:
    """Play `games` game indices x 4 rotations on `table`; `on_progress(indices_done)`."""
    if games < 1:
        raise ValueError(f"games must be >= 1, got {games}")
    stats = DuplicateStats()
    for start in range(first_game, first_game + games, chunk):
        idx = range(start, min(start + chunk, first_game + games))
        batch = [rj for g in idx for rj in rotations(seed, g, challenger, opponent)]
        results = table.play([job for _, job in batch])
        for (seat, job), res in zip(batch, results, strict=True):
            stats.add(job.game_index, seat, res)
        if on_progress:
            on_progress(idx.stop - first_game)
    return stats


POLICY_PLAYER = "policy"  # a trained policy (--checkpoint), played by meeple_mahjong.policy
PLAYERS = (*BOTS, POLICY_PLAYER)
_ROLES = ("challenger", "opponent", "baseline")


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = OneLineParser(
        prog="python -m meeple_mahjong.duplicate", description=__doc__.split("\n\n")[0]
    )
    players = (f"{', '.join(BOTS)} (bots), a checkpoint (.pt) or run directory, or "
               f"{POLICY_PLAYER} (the --checkpoint)")  # fmt: skip
    p.add_argument("--challenger", default="rule", help=players)
    p.add_argument("--opponent", default="random", help=players + "; plays the three other seats")
    p.add_argument("--baseline", default=None,
                   help="a second challenger (" + players + ") played on the same game indices "
                   "against the same opponents; prints the paired comparison")  # fmt: skip
    p.add_argument("--safe-challenger", action="store_true",
                   help="the challenger (a network) never plays a discard the oracle planes show an "
                   "opponent can ron on while another action is legal: the ceiling of phase 2's "
                   "teacher safety rule (meeple_mahjong.safety)")  # fmt: skip
    p.add_argument("--blind-challenger", action="store_true",
                   help="the challenger (a network that reads the oracle planes, phase 2's teacher) "
                   "is shown all-zero oracle planes: what its public part plays")  # fmt: skip
    p.add_argument("--sample", type=float, default=None, metavar="T",
                   help="the challenger and the baseline (networks) draw from softmax(logits / T) "
                   "instead of playing their argmax (opponents stay greedy). The logits already "
                   "include the model's policy_temperature, so --sample 1 plays as PPO trained "
                   "the policy (docs/rl_diagnostics.md section p)")  # fmt: skip
    p.add_argument("--checkpoint", type=Path, default=None,
                   help="the policy's checkpoint (.pt) or run directory (its newest stage's latest.pt)")  # fmt: skip
    p.add_argument("--device", default="cpu", help="torch device of the policy (default cpu)")
    p.add_argument("--threads", type=int, default=1, help="simulator threads (policy games)")
    p.add_argument("--torch-threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--chunk", type=int, default=None,
                   help="game indices per batch (default 8 for bots, 32 with a policy)")  # fmt: skip
    p.add_argument("--games", type=int, default=100, help="game indices (each played 4 times)")
    p.add_argument("--seed", type=int, default=0, help="session seed (walls and bot streams)")
    p.add_argument("--first-game", type=int, default=0, help="first game index")
    p.add_argument("--east-only", action="store_true", help="East-only games (default East-South)")
    p.add_argument("--out", type=Path, default=None, help="write the summary JSON here")
    p.add_argument("--readiness", action="store_true",
                   help="check the design's phase-2 readiness gate on the challenger (conditions: "
                   "meeple_mahjong/conf/transition/from_student_ready.yaml); --opponent must be phase "
                   "1's gate. Exit status 1 when a condition fails")  # fmt: skip
    a = p.parse_args(argv)
    a.sources = {}  # role -> checkpoint path of the network that plays it
    for role in _ROLES:
        name = getattr(a, role)
        if name is None or name in BOTS:
            continue
        if name == POLICY_PLAYER:
            if a.checkpoint is None:
                p.error(f"--{role} {POLICY_PLAYER} needs --checkpoint RUN_DIR_OR_PT")
            a.sources[role] = a.checkpoint
        elif Path(name).exists():
            a.sources[role] = Path(name)
        else:
            p.error(f"--{role} '{name}' is unknown; accepted: {players}")
    if a.sample is not None and not (a.sample > 0 and {"challenger", "baseline"} & set(a.sources)):
        p.error(f"--sample {a.sample}: accepted: a temperature > 0, with a network challenger or baseline")
    if a.safe_challenger and "challenger" not in a.sources:
        p.error("--safe-challenger needs a network challenger (a checkpoint or run directory)")
    if a.blind_challenger and ("challenger" not in a.sources or a.safe_challenger):
        p.error("--blind-challenger needs a network challenger that reads the oracle planes, "
                "and no --safe-challenger (whose rule reads them)")
    if a.readiness and "opponent" not in a.sources:
        p.error("--readiness checks a player against three copies of phase 1: --opponent must be "
                "phase 1's gate (a checkpoint or run directory), not a bot")
    if a.checkpoint is not None and POLICY_PLAYER not in (a.challenger, a.opponent, a.baseline):
        p.error(
            f"--checkpoint is used only with --challenger {POLICY_PLAYER} or --opponent {POLICY_PLAYER}"
        )
    for flag in ("threads", "torch_threads", "chunk"):
        if getattr(a, flag) is not None and getattr(a, flag) < 1:
            p.error(f"--{flag.replace('_', '-')} must be >= 1, got {getattr(a, flag)}")
    if a.games < 1:
        p.error(f"--games must be >= 1, got {a.games}")
    if a.seed < 0 or a.first_game < 0:
        p.error("--seed and --first-game must be >= 0")
    return a


def _fmt(side: dict[str, Any]) -> str:
    return (
        f"avg rank {side['avg_rank']:.3f}, 1st {side['first_rate']:.3f}, "
        f"score {side['avg_score']:.0f}, win {side['win_rate']:.3f}, "
        f"deal-in {side['deal_in_rate']:.3f} (win/deal-in {side['win_per_deal_in']:.2f}), riichi {side['riichi_rate']:.3f}, "
        f"calls {side['call_rate']:.3f} (per hand)"
    )


def _table(a: argparse.Namespace) -> tuple[Table, dict[str, str], dict[str, Any]]:
    """The Table for the players named, each role's player name on it, and what the summary
    records of the networks (one network per distinct checkpoint)."""
    names = {role: getattr(a, role) for role in _ROLES if getattr(a, role) is not None}
    if not a.sources:
        return BotTable(east_only=a.east_only), names, {}
    import torch  # only a policy needs torch

    from meeple.checkpoint.io import CheckpointError, file_sha256, read_sidecar
    from meeple_mahjong.policy import (
        PolicyTable,
        blind_policy,
        greedy_policy,
        load_policy_actor,
        sampled_policy,
    )
    from meeple_mahjong.safety import safe_policy
    from meeple_mahjong.specs import is_oracle

    torch.set_num_threads(a.torch_threads)
    policies, info = {}, {}
    for role, path in a.sources.items():
        actor, loaded = load_policy_actor(path, device=a.device)
        safe = a.safe_challenger and role == "challenger"
        blind = a.blind_challenger and role == "challenger"
        sample = a.sample if role in ("challenger", "baseline") else None
        key = (str(Path(loaded["file"]).resolve()), safe, blind, sample)  # a run directory and its latest.pt: one network
        player = next((n for n, (k, _) in policies.items() if k == key), None)
        if player is None:
            trained = bool(((loaded["config"].get("env") or {}).get("rules") or {}).get("east_only", False))
            if trained != a.east_only:
                print(
                    f"note: the {role} trained on {'East-only' if trained else 'East-South'} games and "
                    f"plays {'East-only' if a.east_only else 'East-South'} ones here (--east-only sets this)",
                    file=sys.stderr,
                )
            player = POLICY_PLAYER if not policies else f"{POLICY_PLAYER}-{len(policies) + 1}"
            if sample is None:
                fn = greedy_policy(actor, device=a.device)
            else:  # each role draws from its own stream: a baseline's draws do not shift the challenger's
                fn = sampled_policy(actor, seed=len(policies), temperature=sample, device=a.device)
            if safe:
                fn = safe_policy(fn)
            if blind:
                if not is_oracle(fn):
                    raise CheckpointError(f"--blind-challenger: {loaded['file']} reads no oracle planes "
                                          "(env.oracle=false); accepted: a network trained with them, "
                                          "e.g. a gates/teacher.pt")
                fn = blind_policy(fn)
            policies[player] = (key, fn)
        # the digest names the network by content: pooling accepts one file under two paths. The
        # load verified the file against its sidecar, so the sidecar's digest is the file's.
        digest = read_sidecar(Path(loaded["file"])) or file_sha256(loaded["file"])
        info[role] = {"checkpoint": loaded["file"], "checkpoint_sha256": digest,
                      "checkpoint_global_step": loaded["global_step"],
                      **({"safe": True} if safe else {}),
                      **({"blind": True} if blind else {}),
                      **({"sample_temperature": sample} if sample is not None else {}),
                      "model": loaded["config"]["model"].get("_target_")}  # fmt: skip
        names[role] = player
    table = PolicyTable({n: fn for n, (_, fn) in policies.items()}, threads=a.threads, east_only=a.east_only)
    # The challenger's keys stay at the top level (the format of earlier versions).
    flat = dict(info.pop("challenger", {}))
    flat.update({f"{role}_policy": v for role, v in info.items()})
    return table, names, flat


def main(argv: Sequence[str] | None = None) -> int:
    a = _args(argv)
    try:
        table, names, policy_info = _table(a)
    except MeepleError as err:
        print(f"meeple: error: {err}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    )
    chunk = a.chunk or (32 if a.sources else 8)
    played = {}
    with task_progress(*columns) as bar:
        for role in ("challenger", "baseline"):
            if role not in names:
                continue
            task = bar.add_task(f"{getattr(a, role)} vs 3x {a.opponent}", total=a.games)
            played[role] = run_duplicate(
                table, names[role], names["opponent"], a.games, a.seed, first_game=a.first_game,
                chunk=chunk, on_progress=lambda done, task=task: bar.update(task, completed=done),
            )  # fmt: skip
    seconds = time.perf_counter() - t0
    stats = played["challenger"]
    summary = {
        "challenger_bot": a.challenger,
        "opponent_bot": a.opponent,
        "seed": a.seed,
        "first_game": a.first_game,
        "east_only": a.east_only,
        **policy_info,
        **stats.summary(),
        "seconds": round(seconds, 3),
        "games_per_hour": round(3600 * 4 * a.games * len(played) / seconds, 1),
    }
    ch, op = summary["challenger"], summary["opponents"]
    ci = ch["avg_rank_ci95"]
    ci_txt = f" (95% CI {ci[0]:.3f}-{ci[1]:.3f})" if ci else ""
    even = ch["vs_even"]
    even_txt = f"; vs 2.5: t = {even['t']:.2f}, p = {even['p']:.3g}" if even else ""
    print(f"{a.games} game indices x 4 rotations, {seconds:.1f} s")
    print(f"challenger {a.challenger}: {_fmt(ch)}{ci_txt}{even_txt}")
    print(f"opponents  {a.opponent}: {_fmt(op)}")
    if "baseline" in played:
        base = played["baseline"].summary()["challenger"]
        paired = paired_comparison(stats, played["baseline"])
        summary["baseline"] = {"player": a.baseline, **base}
        summary["paired"] = paired
        print(f"baseline   {a.baseline}: {_fmt(base)}")
        print(paired_line(paired))
    ready = True
    if a.readiness:
        from .readiness import report_readiness  # torch, through the core's gates

        summary["readiness"] = report_readiness(ch)
        ready = summary["readiness"]["passed"]
    if a.out:
        write_json_atomic(a.out, summary)
        print(f"wrote {a.out}")
    return 0 if ready else 1


if __name__ == "__main__":
    sys.exit(main())
