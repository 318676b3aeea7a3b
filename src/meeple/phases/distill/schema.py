"""Typed schema of conf/phase/distill.yaml and its cross-field checks.

A distillation stage is a PPO stage (every key of :class:`PPOPhase`) with a ``distill`` block:
the teacher reads a privileged observation (``privileged_key``) the student does not; its
planes are grouped (``groups``: name -> [first, end) plane range) and each *oracle stage* of
``schedule`` keeps each group's planes with a probability and weighs KL(student || teacher).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from omegaconf import DictConfig

from meeple.config.schema import require
from meeple.errors import ConfigError
from meeple.phases.ppo.schema import PPOPhase, check_ppo


@dataclass
class OracleStage:
    keep: dict[str, float] = field(default_factory=dict)  # group -> probability a plane is kept
    kl_coef: float = 1.0  # lambda_KL while this stage lasts


@dataclass
class Advance:
    """When an oracle stage ends: after ``max_rollouts`` rollouts, or earlier on a plateau of
    ``metric`` (no improvement by more than ``min_delta`` for ``patience`` rollouts), but not
    before ``min_rollouts``."""

    max_rollouts: int = 50
    min_rollouts: int = 0
    metric: str | None = "loss/teacher_kl"  # a per-rollout training metric; null: step count only
    mode: str = "min"
    patience: int = 5
    min_delta: float = 0.0


@dataclass
class Final:
    """After the last oracle stage: the learning rate drops and the policy term becomes the
    truncated importance-weighted policy gradient (weights min(rho, is_truncation))."""

    lr_factor: float = 0.1
    is_truncation: float = 1.0


@dataclass
class Distill:
    privileged_key: str = "oracle"
    temperature: float = 1.0  # tau: the teacher's logits / tau
    groups: dict[str, list[int]] = field(default_factory=dict)
    schedule: list[OracleStage] = field(default_factory=list)
    advance: Advance = field(default_factory=Advance)
    final: Final = field(default_factory=Final)


@dataclass
class DistillPhase(PPOPhase):
    distill: Distill = field(default_factory=Distill)


def check_distill(cfg: DictConfig, phase: DistillPhase) -> None:
    check_ppo(cfg, phase)
    d = phase.distill
    require(bool(d.privileged_key), "phase.distill.privileged_key", d.privileged_key, "an observation key (oracle)")
    require(d.temperature > 0, "phase.distill.temperature", d.temperature, "a float > 0")
    for name, span in d.groups.items():
        ok = len(span) == 2 and 0 <= span[0] < span[1]
        require(ok, f"phase.distill.groups.{name}", span, "[first plane, end plane) with 0 <= first < end")
    require(len(d.schedule) >= 1, "phase.distill.schedule", d.schedule, "a list of at least one {keep, kl_coef}")
    for i, stage in enumerate(d.schedule):
        unknown = sorted(set(stage.keep) - set(d.groups))
        if unknown:
            raise ConfigError(f"phase.distill.schedule[{i}].keep names unknown group(s) {unknown}; accepted: "
                              f"{', '.join(d.groups) or '(no groups configured)'}")
        for name, p in stage.keep.items():
            require(0 <= p <= 1, f"phase.distill.schedule[{i}].keep.{name}", p, "a probability in [0, 1]")
        require(stage.kl_coef >= 0, f"phase.distill.schedule[{i}].kl_coef", stage.kl_coef, "a float >= 0")
    a = d.advance
    require(a.max_rollouts >= 1, "phase.distill.advance.max_rollouts", a.max_rollouts, "an integer >= 1")
    require(0 <= a.min_rollouts <= a.max_rollouts, "phase.distill.advance.min_rollouts", a.min_rollouts,
            f"an integer in [0, max_rollouts={a.max_rollouts}]")
    require(a.mode in ("min", "max"), "phase.distill.advance.mode", a.mode, "min, max")
    require(a.patience >= 1, "phase.distill.advance.patience", a.patience, "an integer >= 1")
    require(0 < d.final.lr_factor <= 1, "phase.distill.final.lr_factor", d.final.lr_factor, "a float in (0, 1]")
    require(d.final.is_truncation > 0, "phase.distill.final.is_truncation", d.final.is_truncation, "a float > 0")
    transition = cfg.get("transition") or {}
    if not transition.get("teacher"):
        raise ConfigError("phase=distill needs a teacher: transition.teacher=<an earlier stage whose gate is the "
                          "teacher>; accepted: the name of an earlier stage of the pipeline")
