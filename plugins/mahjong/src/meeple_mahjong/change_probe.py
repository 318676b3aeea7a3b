"""What a fine-tuned policy changed, and whether each change was worth it:
python -m meeple_mahjong.change_probe --policy RUN_OR_PT --reference RUN_OR_PT.

A duplicate evaluation says whether a policy P (e.g. PPO from a clone) ranks better than its start
R, but a paired rank over 1,000 game indices has a standard error of ~0.017 and cannot say why. This
probe measures the change itself. P plays greedily in seat 0 against three rule bots; at every
decision where P's argmax differs from R's (a *change*), the table is copied twice
(``BatchSim.copy_tables``, the branches of `meeple_mahjong.branch`): one copy plays P's action, the
other R's, and both play the rest of the hand with R, greedily, and the same bots, on the same wall.
The difference of the learner's rewards to the hand's end,

    delta = Q_R(s, a_P) - Q_R(s, a_R) = A_R(s, P(s)),

is R's advantage of P's choice. By the performance difference lemma, J(P) - J(R) is the sum of
A_R(s, P(s)) over the decisions of P's games, so the mean delta per change says whether P's changes
go the right way, the changes per hand how many there are, and their product the gain per hand
(score units, the horizon one hand: placement is not in it). Changes are split by kind: which tile
to discard, riichi or not, calls, wins declined; and, across kinds, those made while an opponent
is in riichi.

Deterministic continuations and one wall per change: each delta is the effect on that wall, an
unbiased sample of the advantage (the copies start from the real hidden state); its noise is the
spread over walls, which the interval reports.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from meeple.cli.parsing import OneLineParser
from meeple.cli_progress import task_progress
from meeple.errors import MeepleError
from meeple.jsonio import write_json_atomic
from meeple.nets.policy_fn import logits_fn

from .branch import BranchOptions, BranchValues
from .duplicate import mean_ci95
from .policy import load_policy_actor
from .probe_tables import ProbeTables
from .specs import ACTION_KINDS, opponents_in_riichi

KINDS = ("discard", "riichi", "call", "win", "other")  # of a change


def change_kind(a: int, b: int) -> str:
    """The kind of a change between actions a and b of one decision: ``win`` (declare a win or
    not), ``riichi`` (declare or not, or with which tile), ``call`` (call or pass, or which call),
    ``discard`` (which tile), ``other``; the first that either action belongs to."""
    for kind in ("win", "riichi", "call"):
        if a in ACTION_KINDS[kind] or b in ACTION_KINDS[kind]:
            return kind
    return "discard" if a in ACTION_KINDS["discard"] and b in ACTION_KINDS["discard"] else "other"


def _interval(xs: list[float]) -> dict[str, Any]:
    """Mean of the deltas, its 95% interval (duplicate's mean_ci95), spread and one-sample t-test."""
    n = len(xs)
    if n == 0:
        return {"n": 0, "mean": None, "ci95": None, "p": None}
    mean, half = mean_ci95(xs)
    if n < 2:
        return {"n": n, "mean": mean, "ci95": None, "p": None}
    from scipy import stats

    sd = half / 1.96 * math.sqrt(n)
    p = float(stats.ttest_1samp(xs, 0.0).pvalue) if sd > 0 else (1.0 if mean == 0 else 0.0)
    return {"n": n, "mean": mean, "sd": sd, "ci95": [mean - half, mean + half], "p": p}


def probe(policy, reference, *, tables: int, decisions: int, seed: int, threads: int = 1,
          branch_tables: int = 256, on_progress=None) -> dict[str, Any]:  # fmt: skip
    """Plays ``policy`` (greedy, seat 0, vs three rule bots, walls of session ``seed``) for
    ``decisions`` decisions on ``tables`` tables and measures every change against ``reference``
    (module doc). ``policy``/``reference``: logits fns (obs, mask) -> masked logits."""
    play = ProbeTables(tables, seed, threads=threads)
    obs = play.obs
    options = BranchOptions(prob=1.0, candidates=2, tables=branch_tables, max_steps=64, continuation="greedy")
    branch = BranchValues(options, play.rules, play.sim_args, seed=seed)
    branch.set_policy(reference)
    deltas: dict[str, list[float]] = {k: [] for k in KINDS}
    under_riichi: list[float] = []  # the changes (any kind) made while an opponent is in riichi
    seen = choices = 0
    while seen < decisions:
        rows, m, actions = play.deciding()
        if len(rows):
            lp, lr = policy(obs[rows], m), reference(obs[rows], m)
            ap, ar = lp.argmax(-1), lr.argmax(-1)
            seen += len(rows)
            choices += int((m.sum(-1) > 1).sum())
            changed = torch.nonzero(ap != ar).squeeze(-1)
            if len(changed):
                cand = torch.stack([ap[changed], ar[changed]], -1)
                q = branch.values(play.sim, rows[changed], torch.zeros(len(changed), dtype=torch.int64), cand)
                threat = opponents_in_riichi(obs[rows[changed]]).any(-1).tolist()
                for (a, b), d, under in zip(cand.tolist(), (q[:, 0] - q[:, 1]).tolist(), threat, strict=True):
                    deltas[change_kind(a, b)].append(d)
                    if under:
                        under_riichi.append(d)
            actions[rows] = ap
        play.step(actions)
        if on_progress is not None:
            on_progress(min(seen, decisions))
    hands = play.hands()
    every = [d for v in deltas.values() for d in v]
    total = _interval(every)
    return {
        "decisions": seen,
        "decisions_with_a_choice": choices,
        "hands": hands,
        "changes": len(every),
        "change_rate": len(every) / max(choices, 1),
        "delta": total,
        "delta_per_hand": sum(every) / max(hands, 1),
        "points_per_hand": 1e4 * sum(every) / max(hands, 1),
        "by_kind": {k: {**_interval(v), "share": len(v) / max(len(every), 1)} for k, v in deltas.items()},
        "under_riichi": {**_interval(under_riichi), "share": len(under_riichi) / max(len(every), 1)},
        "branches": branch.copies,
        "truncated": branch.truncated,
    }


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = OneLineParser(prog="python -m meeple_mahjong.change_probe", description=__doc__.split("\n\n")[0])
    p.add_argument("--policy", type=Path, required=True, help="the changed policy: a checkpoint or run directory")
    p.add_argument("--reference", type=Path, required=True, help="its start: a checkpoint or run directory")
    p.add_argument("--tables", type=int, default=64, help="tables played at once (default 64)")
    p.add_argument("--decisions", type=int, default=20000, help="the policy's decisions to play (default 20,000)")
    p.add_argument("--seed", type=int, default=0, help="session seed of the walls")
    p.add_argument("--torch-threads", type=int, default=1)
    p.add_argument("--out", type=Path, default=None, help="write the summary JSON here")
    a = p.parse_args(argv)
    if a.tables < 1 or a.decisions < 1 or a.seed < 0 or a.torch_threads < 1:
        p.error("--tables, --decisions and --torch-threads must be >= 1 and --seed >= 0")
    return a


def main(argv: Sequence[str] | None = None) -> int:
    a = _args(argv)
    torch.set_num_threads(a.torch_threads)
    fns = []
    try:
        for path in (a.policy, a.reference):
            actor, _ = load_policy_actor(path)
            actor.eval()
            fns.append(logits_fn(actor))
    except MeepleError as err:
        print(f"meeple: error: {err}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    with task_progress() as bar:
        task = bar.add_task("change probe: decisions", total=a.decisions)
        s = probe(*fns, tables=a.tables, decisions=a.decisions, seed=a.seed,
                  on_progress=lambda done: bar.update(task, completed=done))
    s.update(policy=str(a.policy), reference=str(a.reference), seed=a.seed, seconds=round(time.perf_counter() - t0, 1))
    d = s["delta"]
    ci = f" [{d['ci95'][0]:+.4f}, {d['ci95'][1]:+.4f}], p {d['p']:.3g}" if d["ci95"] else ""
    print(f"{s['decisions']} decisions ({s['decisions_with_a_choice']} with a choice), {s['hands']} hands, "
          f"{s['seconds']} s")
    print(f"changes: {s['changes']} ({s['change_rate']:.2%} of decisions with a choice); "
          f"mean advantage of a change {d['mean'] if d['mean'] is not None else float('nan'):+.4f}{ci}; "
          f"{s['points_per_hand']:+.1f} points per hand")
    for label, v in [*((f"{k:8s}", v) for k, v in s["by_kind"].items()),
                     ("of them under an opponent's riichi:", s["under_riichi"])]:  # fmt: skip
        if v["n"]:
            ci = f" [{v['ci95'][0]:+.4f}, {v['ci95'][1]:+.4f}]" if v["ci95"] else ""
            print(f"  {label} {v['n']:6d} ({v['share']:.0%}) mean {v['mean']:+.4f}{ci}")
    if a.out:
        write_json_atomic(a.out, s)
        print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
