"""How well a public network tells which discards deal in (docs/rl_diagnostics.md, section j):
the cheapest check of whether a student that reads only the public planes can learn the oracle
teacher's deal-in avoidance at all.

A *belief* is a network's per-kind deal-in logits read from the public planes: the auxiliary
``aux_danger`` head of a phase-1 (BC) checkpoint, or the actor's ``danger_logits`` with
``model.danger_head``. On the learner seat's decisions (the reference acting against three rule
bots, as in ``distill_targets``) the oracle planes label each legal discard kind as dealing in or
safe (:func:`meeple_mahjong.safety.ron_kinds`), and the probe reports:

- the ranking quality of the belief: AUC over every legal kind, and *within* the decisions that
  offer a dealing and a safe discard (the pairs of one decision: the choice a policy faces), with
  95% bootstrap intervals over those decisions and the paired difference to the rules below;
- what it is worth to a policy: the reference's discard logits shifted by ``w * log(1 - p)``
  (public) or by ``-w`` on the dealing kinds (the oracle's labels, a perfect belief), as the
  mass left on dealing discards against the KL paid to the reference, for a range of ``w``.

Beside each belief the probe scores a strong player's defence rules read from the same public
planes (:func:`rule_belief`: genbutsu, suji, kabe and visible honours, weighted by who threatens),
and splits the within-decision AUC by who would ron (a riichi player, or a closed/open hand that
has not declared), so a network belief is read against what the planes give without learning.

    python -m meeple_mahjong.belief_probe --belief RUN/gates/phase1.pt --plot belief.png
    python -m meeple_mahjong.belief_probe --belief rules --reference RUN/gates/phase1.pt
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict

from meeple.checkpoint.io import CheckpointError
from meeple.cli.parsing import OneLineParser
from meeple.cli_progress import task_progress
from meeple.errors import MeepleError
from meeple.jsonio import write_json_atomic
from meeple.nets.actor_critic import MASK_KEY

from .distill_targets import decisions, mean_kl
from .net import DANGER_KEY, OBS_KEY
from .policy import load_aux_heads, load_policy_actor, load_policy_heads
from .safety import avoidable, dealing_actions, discard_kinds, ron_kinds, ron_kinds_by_opponent
from .specs import NUM_ACTIONS, SEAT_PLANE_BASE, SEAT_PLANES, opponents_in_riichi

PUBLIC_WEIGHTS = (0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
ORACLE_WEIGHTS = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)
RULES = "rules"  # --belief rules: rule_belief, no network
BOOTSTRAP = 1000  # resamples of the decisions for the within-decision intervals

# Public planes (docs/mahjong_encoding.md) the rules read; opponent i = relative seat 1..3.
_MELD_TILES = 9  # plane SEAT_PLANE_BASE + SEAT_PLANES * i + j
_GENBUTSU, _SUJI, _VISIBLE, _NO_CHANCE, _ONE_CHANCE = 64, 67, 73, 74, 75
_HONOURS = slice(27, 34)


def _seat_plane(obs: torch.Tensor, j: int) -> torch.Tensor:
    """(N, 3, 34): seat plane ``j`` of opponents i = 1..3."""
    return torch.stack([obs[:, SEAT_PLANE_BASE + SEAT_PLANES * i + j] for i in (1, 2, 3)], 1)


def rule_belief(obs: torch.Tensor, threat: torch.Tensor | None = None) -> torch.Tensor:
    """Per-kind danger in [0, 1] from the public planes by a strong player's rules, no learning:
    against each opponent, a kind it cannot ron (genbutsu) is safe, suji and kabe (no-chance,
    one-chance) cut the danger, and an honour with half its copies visible is half as likely; the
    opponent weighs as its threat (riichi 1, two or more calls 0.3, anyone else 0.05). The danger
    of a kind is its largest over the opponents. ``threat`` (N, 3) replaces those weights (the
    probe passes the oracle's tenpai flags: what knowing who can win adds)."""
    if threat is None:
        riichi = opponents_in_riichi(obs)
        calls = _seat_plane(obs, _MELD_TILES).sum(-1) * 4 / 3  # tiles in melds / 3
        threat = 0.05 + riichi.float() * 0.95 + (~riichi & (calls >= 2)).float() * 0.25
    honour = torch.zeros(obs.shape[-1])
    honour[_HONOURS] = 1
    public = ((1 - 0.7 * obs[:, _NO_CHANCE]) * (1 - 0.3 * obs[:, _ONE_CHANCE])
              * (1 - 0.5 * honour * (obs[:, _VISIBLE] >= 0.5))).unsqueeze(1)  # fmt: skip
    per_opponent = (1 - obs[:, _GENBUTSU : _GENBUTSU + 3]) * (1 - 0.6 * obs[:, _SUJI : _SUJI + 3]) * public
    return (threat.unsqueeze(-1) * per_opponent).amax(1)


def _rules_as_logits(obs: torch.Tensor) -> torch.Tensor:
    return torch.logit(rule_belief(obs).clamp(1e-4, 1 - 1e-4))


def load_belief(path: str | Path):
    """``fn(observation [N, 84, 34]) -> logits [N, 34]`` and where it came from: the actor's
    ``danger_logits`` (``model.danger_head``), else the BC auxiliary ``aux_danger`` head
    (``"rules"``: :func:`rule_belief`)."""
    if str(path) == RULES:
        return _rules_as_logits, "public defence rules (genbutsu, suji, kabe; riichi > 2 calls > anyone)"
    actor, info = load_policy_actor(path)
    if info["config"]["model"].get("danger_head"):
        actor.eval()

        def from_actor(obs: torch.Tensor) -> torch.Tensor:
            td = TensorDict({OBS_KEY: obs, MASK_KEY: torch.ones(len(obs), NUM_ACTIONS, dtype=torch.bool)}, [len(obs)])
            return actor.get_dist_params(td)[DANGER_KEY]

        return from_actor, "actor danger_logits (model.danger_head)"
    aux = load_aux_heads(path)
    if aux is None:
        raise CheckpointError(f"{info['file']}: no belief to probe: neither model.danger_head nor BC's auxiliary "
                              "heads (aux.*); accepted: a phase-1 gate, or a stage trained with model.danger_head=true")  # fmt: skip

    def from_aux(obs: torch.Tensor) -> torch.Tensor:
        return aux(TensorDict({OBS_KEY: obs}, [len(obs)]))["aux_danger"]

    return from_aux, "BC auxiliary aux_danger"


def auc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """Area under the ROC curve (Mann-Whitney: the chance a positive outscores a negative, ties
    counting half); nan without both classes."""
    labels = labels.bool()
    n_pos, n_neg = int(labels.sum()), int((~labels).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = scores.double().argsort()
    ranks = torch.empty_like(order, dtype=torch.float64)
    ranks[order] = torch.arange(1, len(scores) + 1, dtype=torch.float64)
    sorted_scores = scores.double()[order]  # average the ranks of ties
    _, inverse, counts = torch.unique_consecutive(sorted_scores, return_inverse=True, return_counts=True)
    ends = counts.cumsum(0).double()
    mean_rank = ends - (counts.double() - 1) / 2
    ranks[order] = mean_rank[inverse]
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def _within_parts(scores: torch.Tensor, dealing: torch.Tensor, safe: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per decision: the (dealing, safe) pairs the dealing kind wins (ties half), and the pairs."""
    pair = dealing.unsqueeze(-1) & safe.unsqueeze(-2)
    greater = ((scores.unsqueeze(-1) > scores.unsqueeze(-2)) & pair).sum((-2, -1))
    ties = ((scores.unsqueeze(-1) == scores.unsqueeze(-2)) & pair).sum((-2, -1))
    return greater.double() + 0.5 * ties.double(), (dealing.sum(-1) * safe.sum(-1)).double()


def _within(scores: torch.Tensor, dealing: torch.Tensor, safe: torch.Tensor) -> float:
    """Over the pairs (dealing kind, safe kind) of one decision, the chance the dealing kind
    scores higher (ties half): the ranking a policy uses when it chooses among its discards."""
    won, pairs = _within_parts(scores, dealing, safe)
    return float(won.sum() / pairs.sum())


def within_intervals(scores: dict[str, torch.Tensor], dealing: torch.Tensor, safe: torch.Tensor,
                     resamples: int = BOOTSTRAP, seed: int = 0) -> dict[str, list[float]]:  # fmt: skip
    """95% bootstrap intervals (decisions resampled with replacement) of each scorer's
    within-decision AUC and of each one's difference to the first scorer, paired: every scorer
    is read on the same resampled decisions, so the difference's interval counts how the scorers
    disagree, not how hard the drawn decisions happen to be. Decisions of one hand share their
    opponents' waits, so the intervals are somewhat narrower than a resampling of whole hands
    would give. Keys: the scorer's name, and ``"<name> - <first>"``."""
    parts = {name: _within_parts(s, dealing, safe) for name, s in scores.items()}
    gen = torch.Generator().manual_seed(seed)
    n = len(dealing)
    picks = torch.randint(0, n, (resamples, n), generator=gen)
    weights = torch.zeros(resamples, n, dtype=torch.float64).scatter_add_(1, picks, torch.ones(resamples, n, dtype=torch.float64))
    draws = {name: (weights @ won) / (weights @ pairs) for name, (won, pairs) in parts.items()}
    first = next(iter(draws))
    draws.update({f"{name} - {first}": d - draws[first] for name, d in list(draws.items()) if name != first})
    return {name: [float(d.quantile(0.025)), float(d.quantile(0.975))] for name, d in draws.items()}


def measure(belief, reference: str | Path, batch: dict[str, torch.Tensor],
            public_weights: Sequence[float] = PUBLIC_WEIGHTS,
            oracle_weights: Sequence[float] = ORACLE_WEIGHTS) -> dict[str, Any]:  # fmt: skip
    """The belief's AUCs and calibration on ``batch`` (``decisions()``), and the dealing mass
    against the KL to the reference for the public and the oracle shift."""
    obs, mask, oracle = batch["observation"], batch["action_mask"].bool(), batch["oracle"]
    kinds = discard_kinds()
    dealing = dealing_actions(oracle, mask, kinds)
    chosen = avoidable(dealing, mask).any(-1)
    if not chosen.any():
        raise MeepleError("no decision offered a dealing and a safe discard: play more --steps or --tables")
    with torch.no_grad():
        p = torch.cat([belief(obs[i : i + 1024]) for i in range(0, len(obs), 1024)]).float().sigmoid()
    label = ron_kinds(oracle)
    gives = kinds >= 0
    legal = torch.zeros_like(label)  # legal discard kinds of each decision
    legal.scatter_reduce_(1, kinds[gives].expand(len(obs), -1), mask[:, gives], "amax")
    pc, lc, gc = p[chosen], label[chosen], legal[chosen]
    deal, safe = gc & lc, gc & ~lc  # the legal dealing and safe kinds of each decision with a choice
    obs_c, oracle_c = obs[chosen], oracle[chosen]  # the baselines score only the decisions with a choice
    rules = rule_belief(obs_c)
    can_ron = rule_belief(obs_c, threat=ron_kinds_by_opponent(oracle_c).any(-1).float())
    by_riichi = _dealt_by_riichi(obs_c, oracle_c)
    threats = {"riichi": by_riichi, "other": ~by_riichi}  # every dealing kind a riichi player's, or not
    probs = load_policy_heads(reference)[0](obs, mask)[0]
    log_probs = probs.clamp_min(1e-12).log()
    p_action = p.index_select(-1, kinds.clamp_min(0)) * gives
    curves: dict[str, list[dict[str, float]]] = {"public": [], "oracle": []}
    for name, weights, shift in (("public", public_weights, (1 - p_action).clamp_min(1e-6).log() * gives),
                                 ("oracle", oracle_weights, -dealing.float())):  # fmt: skip
        for w in weights:
            q = (log_probs + w * shift).masked_fill(~mask, float("-inf")).softmax(-1)
            curves[name].append({"w": float(w), "dealing_mass": float((q * dealing).sum(-1)[chosen].mean()),
                                 "kl_to_reference": max(mean_kl(q, probs), 0.0)})  # fmt: skip
    return {
        "decisions": len(obs),
        "choices": int(chosen.sum()),
        "auc_all": auc(p[legal], label[legal]),
        "auc_choices": auc(pc[gc], lc[gc]),
        "auc_within": _within(pc, deal, safe),
        "rules_auc_within": _within(rules, deal, safe),
        "rules_tenpai_auc_within": _within(can_ron, deal, safe),
        "intervals": within_intervals({"rules": rules, "belief": pc}, deal, safe),
        "by_threat": {name: {"choices": int(rows.sum()), "auc_within": _within(pc[rows], deal[rows], safe[rows]),
                             "rules_auc_within": _within(rules[rows], deal[rows], safe[rows])}
                      for name, rows in threats.items() if rows.any()},  # fmt: skip
        "mean_p_dealing": float(pc[deal].mean()),
        "mean_p_safe": float(pc[safe].mean()),
        "curves": curves,
    }


def _dealt_by_riichi(obs: torch.Tensor, oracle: torch.Tensor) -> torch.Tensor:
    """bool (N,): every kind an opponent could ron now belongs to an opponent in riichi."""
    riichi = opponents_in_riichi(obs).unsqueeze(-1)  # (N, 3, 1)
    by = ron_kinds_by_opponent(oracle)  # (N, 3, 34)
    return (by & riichi).any((1, 2)) & ~(by & ~riichi).any((1, 2))


def plot(result: dict[str, Any], path: Path, title: str) -> None:
    """Dealing mass against the KL paid to the reference, public belief vs the oracle's labels."""
    from matplotlib.figure import Figure  # no pyplot: no GUI backend, no global state

    figure = Figure(figsize=(6, 4), dpi=120, layout="constrained")
    ax = figure.add_subplot()
    for name, style in (("public", "o-"), ("oracle", "s--")):
        rows = result["curves"][name]
        ax.plot([r["kl_to_reference"] for r in rows], [r["dealing_mass"] for r in rows], style,
                label={"public": "public belief: w log(1 - p)", "oracle": "oracle labels: -w"}[name])  # fmt: skip
    ax.set_xscale("symlog", linthresh=1e-3)
    ax.set_xlabel("KL(shifted || reference) per decision")
    ax.set_ylabel("mass on dealing discards")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend()
    figure.savefig(path)


def main(argv: Sequence[str] | None = None) -> int:
    p = OneLineParser(prog="python -m meeple_mahjong.belief_probe", description=__doc__.split("\n\n")[0])
    p.add_argument("--belief", required=True,
                   help="a checkpoint with a deal-in belief: a phase-1 gate (aux_danger) or model.danger_head; "
                        "'rules': the public defence rules")
    p.add_argument("--reference", default=None, help="the policy that acts and is shifted (default: --belief's)")
    p.add_argument("--tables", type=int, default=64)
    p.add_argument("--steps", type=int, default=200, help="env steps: decisions = tables x steps")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="write the result JSON here")
    p.add_argument("--plot", type=Path, default=None, help="write the dealing-mass curve PNG here")
    a = p.parse_args(argv)
    if a.tables < 1 or a.steps < 1:
        p.error(f"--tables {a.tables} --steps {a.steps}; accepted: both >= 1")
    if a.belief == RULES and not a.reference:
        p.error("--belief rules needs --reference: the policy that acts and is shifted")
    reference = a.reference or a.belief
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    try:
        belief, source = load_belief(a.belief)  # before minutes of play
        with task_progress() as bar:
            task = bar.add_task(f"{a.tables} tables, reference vs 3x rule", total=a.steps)
            batch = decisions(reference, a.tables, a.steps, a.seed, on_step=lambda done: bar.update(task, completed=done))
        result = measure(belief, reference, batch)
    except (MeepleError, OSError) as err:
        print(f"meeple: error: {err}", file=sys.stderr)
        return 2
    print(f"{result['decisions']} decisions, {result['choices']} offer a dealing and a safe discard "
          f"({time.perf_counter() - t0:.0f} s); belief: {source}")  # fmt: skip
    print(f"AUC over legal kinds {result['auc_all']:.3f}; on those decisions {result['auc_choices']:.3f}; "
          f"within a decision {result['auc_within']:.3f}; mean p dealing {result['mean_p_dealing']:.3f} "
          f"vs safe {result['mean_p_safe']:.3f}")  # fmt: skip
    print(f"the public defence rules, on the same decisions: within a decision {result['rules_auc_within']:.3f} "
          f"({result['rules_tenpai_auc_within']:.3f} with the oracle's tenpai flags as the threat)")  # fmt: skip
    ci = result["intervals"]
    print("95% bootstrap over decisions: belief [{:.3f}, {:.3f}], rules [{:.3f}, {:.3f}], belief - rules "
          "{:+.3f} [{:+.3f}, {:+.3f}] (paired)".format(*ci["belief"], *ci["rules"],
                                                       result["auc_within"] - result["rules_auc_within"],
                                                       *ci["belief - rules"]))  # fmt: skip
    print(f"{'who would ron':14s} {'decisions':>9s} {'belief':>7s} {'rules':>7s}  (AUC within a decision)")
    for name, row in result["by_threat"].items():
        print(f"{name:14s} {row['choices']:9d} {row['auc_within']:7.3f} {row['rules_auc_within']:7.3f}")
    print(f"{'shift':8s} {'w':>6s} {'dealing mass':>13s} {'KL to reference':>16s}")
    for name, rows in result["curves"].items():
        for r in rows:
            print(f"{name:8s} {r['w']:6g} {r['dealing_mass']:13.4f} {r['kl_to_reference']:16.4f}")
    meta = dict(belief=str(a.belief), source=source, reference=str(reference), tables=a.tables, steps=a.steps,
                seed=a.seed)  # fmt: skip
    if a.out:
        write_json_atomic(a.out, dict(result, **meta))
        print(f"wrote {a.out}")
    if a.plot:
        plot(result, a.plot, f"{Path(a.belief).name}: within-decision AUC {result['auc_within']:.3f}")
        print(f"wrote {a.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
