"""How many branched decisions a gradient of the branch term needs before its signal beats its
noise: python -m meeple_mahjong.branch_noise --policy RUN_OR_PT [--kinds call] [--under-riichi].

The policy plays ``--steps`` decisions on ``--tables`` tables against three rule bots with every
eligible decision branched (``env.branch``, prob 1, 4 candidates); then the gradient of the
all-action surrogate (`meeple_mahjong.branch_ppo.branch_surrogate`, at the collecting policy) on the
actor's weights is taken on two disjoint random halves of those decisions, at several sizes
(`meeple.phases.diagnostics.gradient_agreement`), drawn from two halves of the tables (``--split
tables``, the default: two decisions of one hand share its wall and outcome, and would agree
through that luck if they sat on both sides). Their cosine is n / (n + n0): n0 is the number of
branched decisions at which an update's signal equals its noise. A run that branches B decisions
a rollout and sees them ``ppo_epochs`` times takes steps whose direction is mostly noise while B is
well below n0, and the random walk `meeple_mahjong.policy_drift` measures is what that looks like.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict
from torchrl.envs.utils import ExplorationType, set_exploration_type

from meeple.checkpoint.actor import checkpoint_file
from meeple.checkpoint.io import deserialize, file_sha256, read_verified, save_atomic
from meeple.cli.parsing import OneLineParser
from meeple.cli_progress import task_progress
from meeple.errors import MeepleError
from meeple.jsonio import write_json_atomic
from meeple.nets.policy_fn import logits_fn
from meeple.phases.diagnostics import gradient_agreement

from .batch_env import MahjongEnv
from .branch_ppo import branch_surrogate
from .policy import load_policy_actor
from .specs import ACTION_KINDS

_KEYS = ("observation", "action_mask", "branch_value", "branch_mask", "branch_prior")


def branched_decisions(actor: torch.nn.Module, branch: dict[str, Any], *, tables: int, steps: int, seed: int,
                       on_progress=None) -> TensorDict:  # fmt: skip
    """The branched decisions of ``actor`` (sampling) on ``tables`` tables over ``steps`` env steps
    against three rule bots, with ``env.branch`` = ``branch`` (its prob forced to 1); ``slot`` says
    which table each was taken at. The same ``seed`` plays the same decisions."""
    env = MahjongEnv(tables, branch={**branch, "prob": 1.0})
    env.set_branch_policy(logits_fn(actor))
    env.set_seed(seed)
    td, rows = env.reset(), []
    # the learner's own draws from the seed too (the caller's global RNG left as it was): the same
    # --seed plays the same decisions, whatever the branches cost (e.g. more re-deals)
    with torch.random.fork_rng(), torch.no_grad(), set_exploration_type(ExplorationType.RANDOM):
        torch.manual_seed(seed)
        for i in range(steps):
            td = actor(td)
            keep = td["branch_mask"].any(-1)
            if keep.any():
                rows.append(td.select(*_KEYS)[keep].clone().set("slot", keep.nonzero().squeeze(-1)))
            _, td = env.step_and_maybe_reset(td)  # a finished game's table starts the next one
            if on_progress is not None:
                on_progress(i + 1)
    if not rows:
        raise MeepleError(f"no decision was branched in {steps} steps of {tables} tables; accepted: more --steps "
                          "or --tables, or a wider filter")  # fmt: skip
    return torch.cat(rows)


def branch_options(a: argparse.Namespace) -> dict[str, Any]:
    """``env.branch`` of the commands that branch every eligible decision (--kinds, --under-riichi)."""
    return {"candidates": 4, "tables": max(256, 4 * a.redeals), "kinds": a.kinds, "under_riichi": a.under_riichi,
            "continuation": "sample", "redeals": a.redeals}  # fmt: skip


def kept_decisions(actor: torch.nn.Module, start: Path, branch: dict[str, Any], *, tables: int, steps: int, seed: int,
                   path: Path | None, on_progress=None) -> TensorDict:  # fmt: skip
    """`branched_decisions` of the checkpoint ``start`` (whose actor is ``actor``), read from
    ``path`` when it holds those of the same checkpoint (by checksum) and settings, else played
    and, with a ``path``, written there (atomically): several measurements on one batch."""
    key = {"policy": file_sha256(start), **branch, "tables": tables, "steps": steps, "seed": seed}
    if path is not None and path.exists():
        saved = deserialize(read_verified(path), map_location="cpu", where=str(path))
        if isinstance(saved, dict) and saved.get("key") == key:
            d = saved["decisions"]
            return TensorDict(d, batch_size=[len(d["slot"])])
        print(f"{path} holds decisions of other settings ({saved.get('key') if isinstance(saved, dict) else '?'}); "
              "playing them again", file=sys.stderr)  # fmt: skip
    batch = branched_decisions(actor, branch, tables=tables, steps=steps, seed=seed, on_progress=on_progress)
    if path is not None:
        save_atomic({"key": key, "decisions": batch.to_dict()}, path)
    return batch


def trainable(actor: torch.nn.Module) -> list[torch.nn.Parameter]:
    """The actor's weights a step may move (those that require gradients)."""
    return [p for p in actor.parameters() if p.requires_grad]


def branch_gradient(actor: torch.nn.Module, batch: TensorDict, clip: float) -> Callable[[torch.Tensor], torch.Tensor]:
    """``grad(indices)``: the flat gradient of the branch term over those decisions of ``batch`` on
    the actor's trainable weights (zeros for a weight it does not reach)."""
    params = trainable(actor)

    def grad(idx: torch.Tensor) -> torch.Tensor:
        b = batch[idx]
        with torch.enable_grad():  # also where a caller switched gradients off
            logits = actor.get_dist(b.clone(False)).logits
            loss, _ = branch_surrogate(logits, b["branch_value"], b["branch_mask"], b["branch_prior"], clip)
            grads = torch.autograd.grad(loss, params, allow_unused=True)
        return torch.cat([(g if g is not None else torch.zeros_like(p)).flatten()
                          for g, p in zip(grads, params, strict=True)])  # fmt: skip

    return grad


SPLITS = ("tables", "rows")


def agreement(actor: torch.nn.Module, batch: TensorDict, sizes: Sequence[int], *, repeats: int, clip: float,
              seed: int, split: str = "tables", on_progress=None) -> list[dict[str, float]]:  # fmt: skip
    """gradient_agreement of the branch term on the actor's weights over ``batch``; ``split``:
    halves of whole tables (no wall on both sides; the default) or of random decisions (two
    decisions of one hand share its wall and its outcome, and agree through them)."""
    if split not in SPLITS:
        raise MeepleError(f"split={split!r}; accepted: one of {list(SPLITS)}")
    return gradient_agreement(branch_gradient(actor, batch, clip), len(batch), sizes, repeats=repeats,
                              generator=torch.Generator().manual_seed(seed), on_progress=on_progress,
                              groups=batch["slot"] if split == "tables" else None)  # fmt: skip


def add_decision_args(p: argparse.ArgumentParser) -> None:
    """The options of the commands that play a start's branched decisions (`start_decisions`)."""
    p.add_argument("--policy", type=Path, required=True, help="the start: a checkpoint or run directory")
    p.add_argument("--kinds", nargs="+", default=None, choices=list(ACTION_KINDS),
                   help="branch only decisions offering these kinds (env.branch.kinds)")
    p.add_argument("--under-riichi", action="store_true", help="branch only decisions under an opponent's riichi")
    p.add_argument("--tables", type=int, default=64)
    p.add_argument("--steps", type=int, default=256, help="env steps the start plays (default 256)")
    p.add_argument("--seed", type=int, default=0, help="session seed of the walls")
    p.add_argument("--redeals", type=int, default=1,
                   help="value each candidate as the mean over this many re-deals of the unseen tiles (env.branch.redeals)")
    p.add_argument("--torch-threads", type=int, default=1)
    p.add_argument("--decisions", type=Path, default=None,
                   help="keep the branched decisions in this file: read back when it was written for the same "
                        "checkpoint, --kinds, --under-riichi, --tables, --steps and --seed, else played and written")


def decision_args_error(a: argparse.Namespace) -> str | None:
    if min(a.tables, a.steps, a.torch_threads, a.redeals) < 1 or a.seed < 0:
        return "--tables, --steps, --redeals and --torch-threads must be >= 1 and --seed >= 0"
    return None


def start_decisions(a: argparse.Namespace, bar: Any, label: str) -> tuple[Path, torch.nn.Module, TensorDict]:
    """The start's checkpoint file, its actor and its branched decisions (`kept_decisions`) as
    `add_decision_args`' options ask, with a progress task called ``label``."""
    start = checkpoint_file(a.policy)
    actor, _ = load_policy_actor(start)
    task = bar.add_task(label, total=a.steps)
    batch = kept_decisions(actor, start, branch_options(a), tables=a.tables, steps=a.steps, seed=a.seed,
                           path=a.decisions, on_progress=lambda done: bar.update(task, completed=done))  # fmt: skip
    return start, actor, batch


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = OneLineParser(prog="python -m meeple_mahjong.branch_noise", description=__doc__.split("\n\n")[0])
    add_decision_args(p)
    p.add_argument("--sizes", type=int, nargs="+", default=None,
                   help="half sizes (default: 32, 64, ... up to a third of the branched decisions)")
    p.add_argument("--split", choices=SPLITS, default="tables",
                   help="halves of whole tables (default) or of random decisions, which share walls across halves")
    p.add_argument("--repeats", type=int, default=8)
    p.add_argument("--out", type=Path, default=None, help="write the summary JSON here")
    a = p.parse_args(argv)
    error = decision_args_error(a)
    if error or a.repeats < 1 or (a.sizes and min(a.sizes) < 1):
        p.error(error or "--repeats and --sizes must be >= 1")
    return a


def main(argv: Sequence[str] | None = None) -> int:
    a = _args(argv)
    torch.set_num_threads(a.torch_threads)
    try:
        with task_progress() as bar:
            _, actor, batch = start_decisions(a, bar, "branch noise: steps")
            # a half of the tables holds about half the decisions, give or take a busy table
            sizes = a.sizes or [2**i for i in range(5, 20) if 3 * 2**i <= len(batch)]
            pairs = bar.add_task("branch noise: gradient pairs", total=len(sizes) * a.repeats)
            rows = agreement(actor, batch, sizes, repeats=a.repeats, clip=0.1, seed=a.seed, split=a.split,
                             on_progress=lambda done: bar.update(pairs, completed=done))  # fmt: skip
    except (MeepleError, ValueError) as err:
        print(f"meeple: error: {err}", file=sys.stderr)
        return 2
    print(f"{len(batch)} branched decisions ({a.steps} steps x {a.tables} tables, seed {a.seed}; "
          f"kinds {a.kinds or 'any'}{', under riichi' if a.under_riichi else ''}; halves of {a.split})")
    for r in rows:
        print(f"  halves of {r['n']:6d}: cosine {r['cos']:+.3f} +- {r['cos_sd']:.3f}  -> n0 {r['n0']:,.0f}")
    if a.out:
        write_json_atomic(a.out, {"policy": str(a.policy), "kinds": a.kinds, "under_riichi": a.under_riichi,
                                  "seed": a.seed, "split": a.split, "decisions": len(batch), "sizes": rows})  # fmt: skip
        print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
