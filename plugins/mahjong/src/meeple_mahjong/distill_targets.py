"""What a distillation pulls its student towards, and how far the student got
(docs/mahjong_phase2.md): on one set of decisions, each policy's mass on the discards that deal
in, and its KL to the reference (phase 1) and to the teacher reading all its oracle planes.

The teacher is also read under each oracle stage's plane dropout (``--stages``, the keep
probabilities of the opponents' hands and of the wall; the default, and the plane groups, are
read from `phase=mahjong_distill`'s YAML): that is the target each stage of `phase=distill`
gives the student. With ``--parts`` the teacher is also read with groups of its weights put back to the reference's
(its body, its per-kind logits, all but its oracle stem): which of its weights moved it.

    python -m meeple_mahjong.distill_targets --teacher RUN/gates/teacher.pt \\
        --reference RUN/gates/phase1.pt --policy student=RUN/gates/student.pt

The decisions are the learner seat's at ``--tables`` tables for ``--steps`` steps, the reference
acting (sampled), against three rule bots (where phase 2's student trains) or, with
``--opponents reference``, three copies of the reference (where it is evaluated); the oracle
planes label which discards deal in (meeple_mahjong.safety). The dealing mass is averaged over the decisions that
offer a dealing and a safe action.
"""

from __future__ import annotations

import copy
import sys
import time
from argparse import ArgumentTypeError
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf

from meeple.cli.parsing import OneLineParser
from meeple.cli_progress import task_progress
from meeple.errors import MeepleError
from meeple.jsonio import write_json_atomic
from meeple.phases.distill.module import drop_planes
from meeple.pipeline.transition import adapted_state

from .batch_env import MahjongEnv
from .net import ORACLE_KEY
from .policy import PolicyHeads, load_policy_heads
from .safety import avoidable, dealing_actions, discard_kinds

DISTILL = Path(__file__).parent / "conf" / "phase" / "mahjong_distill.yaml"


def distill_config() -> tuple[dict[str, list[int]], list[tuple[float, float]]]:
    """phase=mahjong_distill's plane groups and its stages' (opponents, wall) keep probabilities."""
    distill = OmegaConf.to_container(OmegaConf.load(DISTILL).distill)
    keeps = [stage["keep"] for stage in distill["schedule"]]
    return distill["groups"], [(keep.get("opponents", 1.0), keep.get("wall", 1.0)) for keep in keeps]


def decisions(reference: str | Path, tables: int, steps: int, seed: int, opponents: str = "rule",
              on_step=None) -> dict[str, torch.Tensor]:  # fmt: skip
    """observation, action_mask and oracle of the learner seat's decisions, the reference acting
    against three ``opponents`` ("rule" or "reference"), concatenated over ``steps``."""
    networks = {"reference": {"path": str(reference), "seed": seed}} if opponents == "reference" else {}
    env = MahjongEnv(tables, opponents=opponents, oracle=True, opponent_checkpoints=networks)
    env.set_seed(seed)
    heads, _ = load_policy_heads(reference)
    generator = torch.Generator().manual_seed(seed)
    td = env.reset()
    seen: dict[str, list[torch.Tensor]] = {"observation": [], "action_mask": [], ORACLE_KEY: []}
    for step in range(steps):
        for key, rows in seen.items():
            rows.append(td[key].clone())
        probs, _ = heads(td["observation"], td["action_mask"])
        td.set("action", torch.multinomial(probs, 1, generator=generator).squeeze(-1))
        _, td = env.step_and_maybe_reset(td)  # a finished game's table starts the next one
        if on_step:
            on_step(step + 1)
    return {key: torch.cat(rows) for key, rows in seen.items()}


def oracle_teacher(path: str | Path) -> PolicyHeads:
    """The teacher's heads; refused unless its actor reads the oracle planes."""
    heads, _ = load_policy_heads(path)
    if not heads.oracle:
        raise MeepleError(f"--teacher {path} does not read the oracle planes; accepted: the gate of a "
                          "stage trained with them (phase 2's teacher.pt)")  # fmt: skip
    return heads


def mean_kl(p: torch.Tensor, q: torch.Tensor) -> float:
    """mean over rows of KL(p || q), for masked distributions (zeros where illegal)."""
    return float((p * (p.clamp_min(1e-12).log() - q.clamp_min(1e-12).log())).sum(-1).mean())


# --parts: the teacher with groups of its weights put back to the reference's (where the reference
# has no such weight, to zero: the oracle stem and a tile head start there), all oracle planes read
PART_RESETS = {
    "teacher, body = reference's": lambda name: "addend" not in name and "oracle_stem" not in name,
    "teacher, per-kind logits = reference's": lambda name: "addend" in name,
    "teacher, all but the oracle stem = reference's": lambda name: "oracle_stem" not in name,
}


def reset_parts(teacher: PolicyHeads, reference: PolicyHeads, which) -> PolicyHeads:
    """A copy of ``teacher`` whose weights named by ``which(name)`` are the reference's (renamed to
    the teacher's layout by any ``adapt_carried_state``, as a carry does) or zero."""
    actor = copy.deepcopy(teacher.actor)
    state = actor.state_dict()
    ref = adapted_state(actor, reference.actor.state_dict())
    for name, value in state.items():
        if which(name):
            same = ref.get(name)
            state[name] = same if same is not None and same.shape == value.shape else torch.zeros_like(value)
    actor.load_state_dict(state)
    return PolicyHeads(actor)


def measure(teacher: str | Path, reference: str | Path, policies: Mapping[str, str | Path],
            batch: Mapping[str, torch.Tensor], stages: Sequence[tuple[float, float]] | None = None,
            seed: int = 0, parts: bool = False) -> dict[str, Any]:  # fmt: skip
    """{"decisions", "choices", "rows": {name: {dealing_mass, kl_to_reference, kl_to_teacher}}}:
    the reference, the teacher under each stage's dropout (``teacher keep O/W``; default:
    mahjong_distill's stages), with ``parts`` the teacher with each of :data:`PART_RESETS` (which
    of its weights moved it from the reference), and ``policies``."""
    groups, default_stages = distill_config()
    obs, mask, oracle = batch["observation"], batch["action_mask"].bool(), batch[ORACLE_KEY]
    dealing = dealing_actions(oracle, mask, discard_kinds())
    chosen = avoidable(dealing, mask).any(-1)
    if not chosen.any():
        raise MeepleError("no decision offered a dealing and a safe action: play more --steps or --tables")
    heads = oracle_teacher(teacher)
    generator = torch.Generator().manual_seed(seed)
    reference_heads = load_policy_heads(reference)[0]
    dists = {"reference": reference_heads(obs, mask)[0]}
    for opponents, wall in default_stages if stages is None else stages:
        keep = {"opponents": opponents, "wall": wall}
        dists[f"teacher keep {opponents:g}/{wall:g}"] = heads(obs, mask, drop_planes(oracle, keep, groups, generator))[0]
    full = heads(obs, mask, oracle)[0]
    for name, which in PART_RESETS.items() if parts else ():
        dists[name] = reset_parts(heads, reference_heads, which)(obs, mask, oracle)[0]
    for name, path in policies.items():
        dists[name] = load_policy_heads(path)[0](obs, mask)[0]
    rows = {
        name: {
            "dealing_mass": float((p * dealing).sum(-1)[chosen].mean()),
            "kl_to_reference": mean_kl(p, dists["reference"]),
            "kl_to_teacher": mean_kl(p, full),
        }
        for name, p in dists.items()
    }
    return {"decisions": len(obs), "choices": int(chosen.sum()), "rows": rows}


def _stage(text: str) -> tuple[float, float]:
    try:
        opponents, wall = (float(x) for x in text.split(","))
    except ValueError:
        raise ArgumentTypeError(f"{text!r}; accepted: OPPONENTS,WALL keep probabilities, e.g. 0.7,0.5") from None
    if not (0 <= opponents <= 1 and 0 <= wall <= 1):
        raise ArgumentTypeError(f"{text!r}; accepted: keep probabilities in [0, 1]")
    return opponents, wall


def _policy(text: str) -> tuple[str, str]:
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise ArgumentTypeError(f"{text!r}; accepted: NAME=CHECKPOINT")
    return name, path


def main(argv: Sequence[str] | None = None) -> int:
    p = OneLineParser(prog="python -m meeple_mahjong.distill_targets", description=__doc__.split("\n\n")[0])
    p.add_argument("--teacher", required=True, help="the oracle teacher's checkpoint (reads the oracle planes)")
    p.add_argument("--reference", required=True, help="phase 1's checkpoint: acts, opposes, and is the KL reference")
    p.add_argument("--policy", action="append", default=[], type=_policy, metavar="NAME=CHECKPOINT",
                   help="a public policy to measure (repeatable), e.g. student=RUN/gates/student.pt")
    p.add_argument("--stages", nargs="*", type=_stage, default=None, metavar="OPPONENTS,WALL",
                   help="the teacher's plane keep probabilities to read it under (default: mahjong_distill's)")
    p.add_argument("--opponents", choices=("rule", "reference"), default="rule",
                   help="who the three other seats are (default: rule bots, as in phase 2's student env)")
    p.add_argument("--parts", action="store_true",
                   help="also the teacher with groups of its weights put back to the reference's (what moved it)")
    p.add_argument("--tables", type=int, default=64)
    p.add_argument("--steps", type=int, default=200, help="env steps: decisions = tables x steps")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="write the result JSON here")
    a = p.parse_args(argv)
    if a.tables < 1 or a.steps < 1:
        p.error(f"--tables {a.tables} --steps {a.steps}; accepted: both >= 1")
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    try:
        oracle_teacher(a.teacher)  # before minutes of play
        with task_progress() as bar:
            task = bar.add_task(f"{a.tables} tables, reference vs 3x {a.opponents}", total=a.steps)
            batch = decisions(a.reference, a.tables, a.steps, a.seed, a.opponents,
                              on_step=lambda done: bar.update(task, completed=done))  # fmt: skip
        result = measure(a.teacher, a.reference, dict(a.policy), batch, a.stages, a.seed, a.parts)
    except (MeepleError, OSError) as err:
        print(f"meeple: error: {err}", file=sys.stderr)
        return 2
    print(f"{result['decisions']} decisions, {result['choices']} offer a dealing and a safe action "
          f"({time.perf_counter() - t0:.0f} s)")  # fmt: skip
    width = max(24, *map(len, result["rows"]))
    print(f"{'policy':{width}s} {'dealing mass':>12s} {'KL to reference':>16s} {'KL to teacher':>14s}")
    for name, row in result["rows"].items():
        print(f"{name:{width}s} {row['dealing_mass']:12.4f} {row['kl_to_reference']:16.4f} {row['kl_to_teacher']:14.4f}")
    if a.out:
        write_json_atomic(a.out, dict(result, teacher=a.teacher, reference=a.reference, opponents=a.opponents,
                                      tables=a.tables, steps=a.steps, seed=a.seed))
        print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
