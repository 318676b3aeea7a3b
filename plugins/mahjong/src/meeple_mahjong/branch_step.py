"""One large policy-improvement step from branched action values:
python -m meeple_mahjong.branch_step --policy RUN_OR_PT (--out NEW.pt | --line L ...) [--kinds call].

PPO on branched values (phase1_branch) takes 1,440 small steps a run, each on ~60 branched
decisions, and its changes walk at random (`meeple_mahjong.policy_drift`). This command takes the
other road: the start policy plays ``--steps`` decisions on ``--tables`` tables against three rule
bots with every eligible decision branched (``env.branch``, prob 1, 4 candidates, values of the
start policy; `meeple_mahjong.branch_noise.start_decisions`), and a few steps on that one batch
move the actor: ``--updates`` steps of the all-action clipped surrogate
(`meeple_mahjong.branch_ppo.branch_surrogate`) plus ``--kl-coef`` times KL(start || new) over all
legal actions, by full-batch Adam, fixed-length steps along the full-batch gradient
(``normalized``) or epochs of Adam over minibatches (``epochs``: PPO's own update). The result is
a checkpoint that `meeple_mahjong.duplicate` can seat. ``--line`` instead prices the start moved
along its own full-batch gradient at several lengths (no checkpoint). What it measured on the
phase-1 gate (docs/rl_diagnostics.md, section s): nothing gains held out at the calls; at all
decisions the sampled policy gains ~0.0004 a decision, the greedy one nothing.

The tables are split in two: the decisions of a ``--held-out`` share of them (other walls) never
train, and after every update they price it, with the start policy's branched values:

- ``gain``: sum_a (pi_C(a) - mu(a)) A(a), the first-order change in the expected value of the
  decision (reward units; 1.0 = 10,000 points) of the sampled policy;
- ``greedy``: A(argmax new) - A(argmax start), the same for the greedy policy every evaluation
  plays, over all held-out decisions (most are 0: the argmax did not move);

each with its standard error. A step whose held-out gain is not above 0 learned the training
walls, not the game; one that is tells the duplicate evaluation what to expect per decision.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict

from meeple.checkpoint.io import load_verified, save_atomic
from meeple.cli.parsing import OneLineParser
from meeple.cli_progress import task_progress
from meeple.errors import MeepleError
from meeple.jsonio import write_json_atomic
from meeple.phases.diagnostics import kl_rows

from .branch import candidate_advantages, candidate_probs
from .branch_noise import add_decision_args, decision_args_error, start_decisions, trainable
from .branch_ppo import branch_surrogate

_CHUNK = 4096  # decisions per forward pass: a full-batch gradient is accumulated over chunks


def split_by_table(batch: TensorDict, held_out: float, seed: int) -> tuple[TensorDict, TensorDict]:
    """(train, held-out): the decisions of a random ``held_out`` share of the tables (``slot``) apart,
    so that no held-out decision shares a wall with a training one."""
    slots = batch["slot"].unique()
    order = slots[torch.randperm(len(slots), generator=torch.Generator().manual_seed(seed))]
    n = max(1, round(held_out * len(slots))) if held_out > 0 else 0
    test = torch.isin(batch["slot"], order[:n])
    return batch[~test], batch[test]


def _log_probs(actor: torch.nn.Module, batch: TensorDict) -> torch.Tensor:
    """Log-probabilities [N, A] over the legal actions (-inf elsewhere: the actor's masked
    categorical normalises them), chunk by chunk."""
    return torch.cat([actor.get_dist(batch[i:i + _CHUNK].clone(False)).logits
                      for i in range(0, len(batch), _CHUNK)])  # fmt: skip


def held_out_value(log_p: torch.Tensor, start_log_p: torch.Tensor, batch: TensorDict) -> dict[str, float]:
    """The held-out prices of the module doc (means over decisions, their standard errors, and
    the share of decisions whose argmax moved) of the policy ``log_p`` against the start's."""
    mask, prior = batch["branch_mask"], batch["branch_prior"]
    adv = candidate_advantages(batch["branch_value"], mask, prior)
    gain = ((candidate_probs(log_p, mask) - prior) * adv).sum(-1)
    new, old = log_p.argmax(-1), start_log_p.argmax(-1)
    # An argmax outside the candidates has no branched value: priced as the start's choice (0).
    valid = mask.gather(-1, new[:, None]).squeeze(-1) & mask.gather(-1, old[:, None]).squeeze(-1)
    greedy = torch.where(valid, adv.gather(-1, new[:, None]).squeeze(-1) - adv.gather(-1, old[:, None]).squeeze(-1),
                         torch.zeros_like(gain))  # fmt: skip
    n = len(gain)

    def se(x: torch.Tensor) -> float:
        return float(x.std() / math.sqrt(n)) if n > 1 else float("nan")

    return {"gain": float(gain.mean()), "gain_se": se(gain), "greedy": float(greedy.mean()), "greedy_se": se(greedy),
            "moved": float((new != old).float().mean()), "kl": float(kl_rows(start_log_p, log_p).mean())}  # fmt: skip


OPTIMIZERS = ("adam", "normalized", "epochs")


def _gradient(actor: torch.nn.Module, train: TensorDict, start_train: torch.Tensor, *, kl_coef: float,
              clip: float) -> float:  # fmt: skip
    """Accumulate into the weights' ``.grad`` the full-batch gradient of the branch surrogate +
    ``kl_coef`` KL(start || actor) over ``train`` (chunk by chunk); return that loss."""
    total = 0.0
    with torch.enable_grad():  # also where a caller switched gradients off
        for i in range(0, len(train), _CHUNK):
            b = train[i:i + _CHUNK]
            w = len(b) / len(train)  # the chunks' mean is the full batch's mean
            log_p = actor.get_dist(b.clone(False)).logits  # normalised over the legal actions
            loss, _ = branch_surrogate(log_p, b["branch_value"], b["branch_mask"], b["branch_prior"], clip)
            if kl_coef > 0:
                loss = loss + kl_coef * kl_rows(start_train[i:i + _CHUNK], log_p).mean()
            (w * loss).backward()
            total += w * float(loss.detach())
    return total


class _Pricer:
    """The prices of `held_out_value` of the actor as it is now, on the held-out decisions and
    (``train_gain``, ``train_greedy``: how well the step fits what it trained on) the training ones."""

    def __init__(self, actor: torch.nn.Module, train: TensorDict, test: TensorDict) -> None:
        self.actor, self.train, self.test = actor, train, test
        with torch.no_grad():
            self.start_train = _log_probs(actor, train)
            self.start_test = _log_probs(actor, test) if len(test) else None

    @torch.no_grad()
    def __call__(self) -> dict[str, float]:
        fit = held_out_value(_log_probs(self.actor, self.train), self.start_train, self.train)
        row = {"train_gain": fit["gain"], "train_greedy": fit["greedy"]}
        if self.start_test is not None:
            row.update(held_out_value(_log_probs(self.actor, self.test), self.start_test, self.test))
        return row


def improve(actor: torch.nn.Module, train: TensorDict, test: TensorDict, *, updates: int, lr: float, kl_coef: float,
            clip: float, optimizer: str = "adam", minibatch: int = 256, seed: int = 0,
            on_update=None) -> list[dict[str, float]]:  # fmt: skip
    """``updates`` steps of the branch surrogate + ``kl_coef`` KL(start || actor) on ``train`` (the
    actor changes in place); the prices after each (row 0: the start).

    ``optimizer``: ``adam`` (full-batch Adam at ``lr``: its first steps move every weight by about
    ``lr``, whatever that weight's gradient is worth), ``normalized`` (each step ``lr`` long, in the
    weights' Euclidean norm, along the full-batch gradient: its direction is the gradient's, so a
    weight with a small gradient moves little) or ``epochs`` (an update is one epoch of Adam over
    shuffled minibatches of ``minibatch`` decisions: PPO's own update, on one batch of many n0)."""
    if optimizer not in OPTIMIZERS:
        raise MeepleError(f"optimizer={optimizer!r}; accepted: one of {list(OPTIMIZERS)}")
    params = trainable(actor)
    opt = torch.optim.Adam(params, lr=lr) if optimizer == "adam" else torch.optim.SGD(params, lr=lr)
    price = _Pricer(actor, train, test)
    rows: list[dict[str, float]] = []

    def record(row: dict[str, float]) -> None:
        rows.append({**row, **price()})
        if on_update is not None:
            on_update(rows[-1])

    record({"update": 0, "train_loss": float("nan")})
    generator = torch.Generator().manual_seed(seed)
    for u in range(1, updates + 1):
        if optimizer == "epochs":
            losses = []
            for idx in torch.randperm(len(train), generator=generator).split(minibatch):
                opt.zero_grad(set_to_none=True)
                losses.append(_gradient(actor, train[idx], price.start_train[idx], kl_coef=kl_coef, clip=clip))
                opt.step()
            record({"update": u, "train_loss": sum(losses) / len(losses)})
            continue
        opt.zero_grad(set_to_none=True)
        loss = _gradient(actor, train, price.start_train, kl_coef=kl_coef, clip=clip)
        if optimizer == "normalized":
            norm = torch.sqrt(sum(p.grad.pow(2).sum() for p in params if p.grad is not None))
            for p in params:
                if p.grad is not None:
                    p.grad.div_(norm.clamp_min(1e-30))
        opt.step()
        record({"update": u, "train_loss": loss})
    return rows


def line_search(actor: torch.nn.Module, train: TensorDict, test: TensorDict, lengths: Sequence[float], *,
                clip: float, on_point=None) -> list[dict[str, float]]:  # fmt: skip
    """The prices of the start moved ``length`` (in the weights' Euclidean norm) along its own
    full-batch branch gradient on ``train``, for each length (row 0: the start; the actor is the
    start again afterwards). Where the held-out gain stays at or below 0 while the training gain
    grows, that gradient is the training walls' noise, whatever the step size."""
    params = trainable(actor)
    start = [p.detach().clone() for p in params]
    price = _Pricer(actor, train, test)
    for p in params:
        p.grad = None
    _gradient(actor, train, price.start_train, kl_coef=0.0, clip=clip)
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    norm = torch.sqrt(sum(g.pow(2).sum() for g in grads)).clamp_min(1e-30)
    rows = []
    try:
        for length in [0.0, *lengths]:
            with torch.no_grad():
                for p, p0, g in zip(params, start, grads, strict=True):
                    p.copy_(p0 - length * g / norm)
            rows.append({"length": length, "grad_norm": float(norm), **price()})
            if on_point is not None:
                on_point(rows[-1])
    finally:
        with torch.no_grad():
            for p, p0 in zip(params, start, strict=True):
                p.copy_(p0)
                p.grad = None
    return rows


def save_policy(actor: torch.nn.Module, start: Path, out: Path, info: dict[str, Any]) -> None:
    """``start``'s checkpoint with the actor's weights replaced (its optimizer state dropped: it
    belongs to the old weights) and ``info`` under ``branch_step``; written atomically, with its
    checksum sidecar."""
    ckpt = load_verified(start, map_location="cpu")
    state = ckpt["model_state_dict"]
    for name, tensor in actor.state_dict().items():
        key = f"actor.{name}"
        if key not in state:
            raise MeepleError(f"{start}: the saved model has no weight {key}; accepted: a checkpoint of the "
                              "actor's own architecture")  # fmt: skip
        state[key] = tensor.detach().clone()
    ckpt["optimizer_state_dict"] = None
    ckpt["scheduler_state_dict"] = None
    ckpt["branch_step"] = info
    save_atomic(ckpt, out)


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = OneLineParser(prog="python -m meeple_mahjong.branch_step", description=__doc__.split("\n\n")[0])
    add_decision_args(p)
    p.add_argument("--out", type=Path, default=None, help="the improved checkpoint to write (not with --line)")
    p.add_argument("--line", type=float, nargs="+", default=None, metavar="LENGTH",
                   help="instead of updates: price the start moved this far along its full-batch gradient (in the "
                        "weights' Euclidean norm), for each length; no checkpoint is written")
    p.add_argument("--held-out", type=float, default=0.25, help="share of the tables kept apart (default 0.25)")
    p.add_argument("--updates", type=int, default=20, help="full-batch steps (default 20; 0: only play and price)")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="adam",
                   help="adam (full-batch), normalized (steps --lr long along the full-batch gradient) or epochs "
                        "(an update is an epoch of Adam over minibatches of --minibatch) (default adam)")
    p.add_argument("--minibatch", type=int, default=256, help="decisions a minibatch with --optimizer epochs")
    p.add_argument("--lr", type=float, default=3e-5)
    p.add_argument("--kl-coef", type=float, default=0.2, help="weight of KL(start || new) (default 0.2)")
    p.add_argument("--clip", type=float, default=0.1, help="the surrogate's clip epsilon (default 0.1)")
    p.add_argument("--summary", type=Path, default=None, help="write the summary JSON here")
    a = p.parse_args(argv)
    error = decision_args_error(a)
    if error or a.minibatch < 1 or a.updates < 0:
        p.error(error or "accepted: --minibatch >= 1, --updates >= 0")
    if not 0 <= a.held_out < 1 or a.lr <= 0 or a.kl_coef < 0 or not 0 < a.clip < 1:
        p.error("accepted: 0 <= --held-out < 1, --lr > 0, --kl-coef >= 0, 0 < --clip < 1")
    if (a.out is None) == (a.line is None) or (a.line and min(a.line) <= 0):
        p.error("accepted: --out (take the steps) or --line with lengths > 0 (price the gradient's line), one of them")
    return a


def _prices(row: dict[str, float]) -> str:
    text = f"train gain {row['train_gain']:+.5f} greedy {row['train_greedy']:+.5f}"
    if "gain" in row:
        text += (f" | held-out gain {row['gain']:+.5f} +- {row['gain_se']:.5f}, greedy {row['greedy']:+.5f} +- "
                 f"{row['greedy_se']:.5f}, argmax moved {row['moved']:.2%}, KL {row['kl']:.5f}")  # fmt: skip
    return text


def _line(row: dict[str, float]) -> str:
    where = f"update {row['update']:3d}" if "update" in row else f"length {row['length']:.4g}"
    return f"  {where}: {_prices(row)}"


def main(argv: Sequence[str] | None = None) -> int:
    a = _args(argv)
    torch.set_num_threads(a.torch_threads)
    try:
        with task_progress() as bar:
            start, actor, batch = start_decisions(a, bar, "branch step: start plays")
            train, test = split_by_table(batch, a.held_out, a.seed)
            print(f"{len(train)} training and {len(test)} held-out branched decisions ({a.steps} steps x "
                  f"{a.tables} tables, seed {a.seed}; kinds {a.kinds or 'any'}"
                  f"{', under riichi' if a.under_riichi else ''})", flush=True)  # fmt: skip
            points = bar.add_task("branch step: " + ("lengths" if a.line else "updates"),
                                  total=len(a.line) + 1 if a.line else a.updates + 1)  # fmt: skip

            def report(row: dict[str, float]) -> None:
                print(_line(row), flush=True)
                bar.advance(points)

            if a.line:
                rows = line_search(actor, train, test, a.line, clip=a.clip, on_point=report)
            else:
                rows = improve(actor, train, test, updates=a.updates, lr=a.lr, kl_coef=a.kl_coef, clip=a.clip,
                               optimizer=a.optimizer, minibatch=a.minibatch, seed=a.seed, on_update=report)  # fmt: skip
        info = {"start": str(start), "kinds": a.kinds, "under_riichi": a.under_riichi, "seed": a.seed,
                "steps": a.steps, "tables": a.tables, "train": len(train), "held_out": len(test), "clip": a.clip}
        info.update({"line": rows} if a.line else {"updates": a.updates, "optimizer": a.optimizer, "minibatch": a.minibatch, "lr": a.lr,
                                                    "kl_coef": a.kl_coef, "curve": rows})  # fmt: skip
        if a.out:
            save_policy(actor, start, a.out, info)
    except (MeepleError, ValueError) as err:
        print(f"meeple: error: {err}", file=sys.stderr)
        return 2
    if a.out:
        print(f"wrote {a.out}")
    if a.summary:
        write_json_atomic(a.summary, info)
        print(f"wrote {a.summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
