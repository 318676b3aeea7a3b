"""Typed schema of conf/phase/packed_ppo.yaml (PPO's, plus the packed pipeline's options)."""

from __future__ import annotations

from dataclasses import dataclass, field

from omegaconf import DictConfig

from meeple.config.schema import require
from meeple.phases.ppo.schema import PPOLoss, PPOPhase, check_ppo


@dataclass
class PackedPPOLoss(PPOLoss):
    max_importance_weight: float = 2.0  # truncation of pi_prox / mu in the decoupled objective


@dataclass
class PackedStop:
    success_rate: float | None = None


@dataclass
class PackedPPOPhase(PPOPhase):
    """PPO on a packed-frame env (meeple.phases.packed_ppo.data): sync or async double-buffered."""

    mode: str = "sync"
    max_policy_lag: int = 1
    loss: PackedPPOLoss = field(default_factory=PackedPPOLoss)
    stop: PackedStop = field(default_factory=PackedStop)


def check_packed_ppo(cfg: DictConfig, phase: PackedPPOPhase) -> None:
    check_ppo(cfg, phase)
    require(phase.reference_kl.coef == 0, "phase.reference_kl.coef", phase.reference_kl.coef,
             "0 (packed_ppo keeps no reference policy)")
    require(phase.diagnostics.every_n_rollouts == 0, "phase.diagnostics.every_n_rollouts",
            phase.diagnostics.every_n_rollouts, "0 (packed_ppo has no gradient split)")
    require(phase.mode in ("sync", "async"), "phase.mode", phase.mode, "sync, async")
    require(phase.max_policy_lag in (0, 1), "phase.max_policy_lag", phase.max_policy_lag,
             "0 or 1 (two rollout buffers)")
    require(phase.loss.max_importance_weight >= 1, "phase.loss.max_importance_weight",
             phase.loss.max_importance_weight, "a float >= 1")
