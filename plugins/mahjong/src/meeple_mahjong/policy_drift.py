"""How a fine-tuning run's policy moved, checkpoint by checkpoint, on fixed decisions:
python -m meeple_mahjong.policy_drift --start START CHECKPOINTS_OR_FOLDERS...

The start plays greedily in seat 0 against three rule bots and its decisions with a choice are
kept; every checkpoint is read on those same decisions. Per kind of decision (those offering a
call, those offering riichi, the other discards; and across them those taken under an opponent's
riichi) it prints KL(pi_t || pi_0) from the start
along the run, and for growing lags k (in checkpoints) KL(pi_{t+k} || pi_t) and the correlation
of the changes from the start at t and t+k (`meeple.phases.diagnostics.policy_drift`, whose doc
says how to read them): whether a run keeps what its updates learn, or each update replaces the
last ones' lesson, so that more rollouts cannot average the noise of its signal away.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch

from meeple.checkpoint.retention import checkpoint_step
from meeple.cli.parsing import OneLineParser
from meeple.cli_progress import task_progress
from meeple.errors import MeepleError
from meeple.jsonio import write_json_atomic
from meeple.nets.policy_fn import logits_fn
from meeple.phases.diagnostics import policy_drift

from .policy import load_policy_actor
from .probe_tables import ProbeTables
from .specs import opponents_in_riichi, rows_offering

GROUPS = ("call", "riichi", "discard")  # a decision offering a call; else offering riichi; else the rest


def decisions(policy, *, states: int, tables: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(obs, mask)`` of the first ``states`` decisions with two or more legal actions that
    ``policy`` (a logits fn, greedy) meets in seat 0 against three rule bots, walls of ``seed``."""
    play = ProbeTables(tables, seed)
    obs = play.obs
    kept_obs, kept_mask, kept = [], [], 0
    while kept < states:
        rows, m, actions = play.deciding()
        if len(rows):
            actions[rows] = policy(obs[rows], m).argmax(-1)
            choice = m.sum(-1) > 1
            kept_obs.append(obs[rows][choice].clone())
            kept_mask.append(m[choice])
            kept += int(choice.sum())
        play.step(actions)
    return torch.cat(kept_obs)[:states], torch.cat(kept_mask)[:states]


def group_rows(obs: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
    """Rows of each of GROUPS (disjoint; a call offer wins over a riichi offer), and across them
    ``under_riichi``: those taken while an opponent is in riichi (env.branch.under_riichi's)."""
    call = rows_offering(mask, ("call",))
    riichi = rows_offering(mask, ("riichi",)) & ~call
    return {"call": call, "riichi": riichi, "discard": ~call & ~riichi,
            "under_riichi": opponents_in_riichi(obs).any(-1)}  # fmt: skip


def checkpoint_files(paths: Sequence[Path], every: int) -> list[Path]:
    """The files named, and each folder's ``ckpt_phase*_step*.pt`` in step order; every
    ``every``-th of them, the last always kept."""
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            found = [f for f in p.glob("ckpt_phase*_step*.pt") if checkpoint_step(f) is not None]
            if not found:
                raise MeepleError(f"{p}: no ckpt_phase<N>_step<S>.pt files; accepted: a checkpoints folder or files")
            files += sorted(found, key=checkpoint_step)
        else:
            files.append(p)
    if len(files) < 2:
        raise MeepleError(f"{len(files)} checkpoint(s); accepted: two or more (files or a checkpoints folder)")
    picked = files[::every]
    return picked if picked[-1] == files[-1] else [*picked, files[-1]]


def default_lags(n: int) -> list[int]:
    """1, 2, 4, ... below ``n`` checkpoints."""
    lags, k = [], 1
    while k < n:
        lags.append(k)
        k *= 2
    return lags


def measure(start, checkpoints: Iterable[Any], obs: torch.Tensor, mask: torch.Tensor,
            lags: Sequence[int], on_progress=None) -> dict[str, Any]:  # fmt: skip
    """policy_drift per group of decisions; ``start`` and ``checkpoints``: logits fns (read one
    at a time: a run's hundreds of checkpoints need not fit in memory at once)."""
    def log_probs(fn):
        return fn(obs, mask).log_softmax(-1)

    base = log_probs(start)
    seq = []
    for i, fn in enumerate(checkpoints):
        seq.append(log_probs(fn))
        if on_progress is not None:
            on_progress(i + 1)
    out: dict[str, Any] = {"lags": list(lags), "groups": {}}
    for name, rows in {"all": torch.ones(len(mask), dtype=torch.bool), **group_rows(obs, mask)}.items():
        if rows.sum() < 2:
            continue
        out["groups"][name] = {"decisions": int(rows.sum()), **policy_drift([s[rows] for s in seq], base[rows], lags)}
    return out


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = OneLineParser(prog="python -m meeple_mahjong.policy_drift", description=__doc__.split("\n\n")[0])
    p.add_argument("checkpoints", type=Path, nargs="+", help="checkpoint files or checkpoints folders, in order")
    p.add_argument("--start", type=Path, required=True, help="the policy the run started from (checkpoint or run)")
    p.add_argument("--states", type=int, default=4096, help="decisions with a choice to read (default 4,096)")
    p.add_argument("--every", type=int, default=1, help="read every N-th checkpoint (default 1)")
    p.add_argument("--seed", type=int, default=0, help="session seed of the walls")
    p.add_argument("--tables", type=int, default=64)
    p.add_argument("--torch-threads", type=int, default=1)
    p.add_argument("--out", type=Path, default=None, help="write the summary JSON here")
    a = p.parse_args(argv)
    if min(a.states, a.every, a.tables, a.torch_threads) < 1 or a.seed < 0:
        p.error("--states, --every, --tables and --torch-threads must be >= 1 and --seed >= 0")
    return a


def _load(path: Path):
    actor, _ = load_policy_actor(path)
    return logits_fn(actor)


def main(argv: Sequence[str] | None = None) -> int:
    a = _args(argv)
    torch.set_num_threads(a.torch_threads)
    try:
        files = checkpoint_files(a.checkpoints, a.every)
        start = _load(a.start)
        obs, mask = decisions(start, states=a.states, tables=a.tables, seed=a.seed)
        with task_progress() as bar:
            task = bar.add_task("policy drift: checkpoints", total=len(files))
            s = measure(start, map(_load, files), obs, mask, default_lags(len(files)),
                        on_progress=lambda done: bar.update(task, completed=done))
    except MeepleError as err:
        print(f"meeple: error: {err}", file=sys.stderr)
        return 2
    s.update(start=str(a.start), checkpoints=[str(f) for f in files], seed=a.seed)
    print(f"{len(files)} checkpoints, {len(obs)} decisions with a choice (seed {a.seed})")
    for name, g in s["groups"].items():
        ks = "  ".join(f"{v:.4f}" for v in g["to_start"][:: max(1, len(files) // 8)])
        print(f"{name} ({g['decisions']}): KL to start along the run {ks} (last {g['to_start'][-1]:.4f})")
        for k, kl, c, w in zip(s["lags"], g["lag_kl"], g["lag_corr"], g["walk_corr"], strict=True):
            print(f"  lag {k:4d}: KL(t+k || t) {kl:.4f}  corr of changes {c:+.3f} (a random walk: {w:+.3f})")
    if a.out:
        write_json_atomic(a.out, s)
        print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
