"""The design's phase-2 readiness gate, checked on a 1v3 duplicate summary (``duplicate --readiness``).

The conditions live in one place, ``conf/transition/from_student_ready.yaml``: the league's
transition when phase 3 should start only from a ready student, which checks them on the
student stage's in-run ``vs_start`` evaluation (against three copies of phase 1). Here the same
file is read and its conditions are checked on the challenger's side of a summary written by
``python -m meeple_mahjong.duplicate --opponent <phase 1's gate>``, under the same metric names.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from meeple.config.schema import Gate, Transition, gate_conditions
from meeple.pipeline.transition import gate_checks

GATE_FILE = Path(__file__).parent / "conf" / "transition" / "from_student_ready.yaml"
PREFIX = "eval/vs_start_"  # the student stage's evaluation against copies of its start
_FROM_SUMMARY = ("avg_rank", "deal_in_rate", "win_rate", "win_per_deal_in")


def readiness_gates() -> list[Gate]:
    """The readiness gate's conditions, as the transition checks them."""
    node = OmegaConf.to_container(OmegaConf.load(GATE_FILE), resolve=True)
    return gate_conditions(Transition(name=str(node["name"]), gate=node["gate"]))


def summary_metrics(challenger: dict[str, Any]) -> dict[str, float]:
    """A duplicate summary's challenger side under the in-run evaluation's metric names; the
    p-value is the two-sided t-test of the per-index ranks against 2.5 (nan without one)."""
    metrics = {PREFIX + k: float(challenger[k]) for k in _FROM_SUMMARY}
    even = challenger.get("vs_even")
    metrics[PREFIX + "p_value"] = float(even["p"]) if even else math.nan
    return metrics


def check_readiness(challenger: dict[str, Any]) -> dict[str, Any]:
    """``{"passed": bool, "checks": [{metric, value, op, threshold, passed}, ...], "gate": file}``."""
    checks = gate_checks(readiness_gates(), summary_metrics(challenger))
    return {"passed": all(c["passed"] for c in checks), "checks": checks, "gate": GATE_FILE.name}


def readiness_lines(verdict: dict[str, Any]) -> list[str]:
    """What ``duplicate --readiness`` prints: the verdict, then one line per condition."""
    lines = [f"readiness gate ({verdict['gate']}): {'PASSED' if verdict['passed'] else 'FAILED'}"]
    for c in verdict["checks"]:
        name = c["metric"].removeprefix(PREFIX)
        lines.append(
            f"  {name:<16} {c['value']:.4g} {c['op']} {c['threshold']:g}: "
            f"{'pass' if c['passed'] else 'FAIL'}"
        )
    return lines


def report_readiness(challenger: dict[str, Any]) -> dict[str, Any]:
    """Check the gate on ``challenger``, print its lines, return the verdict (the commands'
    ``--readiness``)."""
    verdict = check_readiness(challenger)
    print("\n".join(readiness_lines(verdict)))
    return verdict
