"""Typed schema of conf/phase/dqn.yaml (independent DQN learners) and its checks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig

from meeple.config.schema import check_hardware, checked, require
from meeple.errors import ConfigError


@dataclass
class TargetUpdate:
    kind: str = "soft"  # soft | hard
    tau: float = 0.01  # soft: theta' <- (1 - tau) theta' + tau theta after every update
    hard_interval: int = 500  # hard: copy theta -> theta' every this many updates


@dataclass
class Exploration:
    eps_init: float = 1.0
    eps_end: float = 0.05
    annealing_steps: int = 20_000  # env steps of linear decay


@dataclass
class DQNEval:
    episodes: int = 20


@dataclass
class DQNPhase:
    """Independent DQN learners (meeple.phases.dqn): one learner process per agent, one actor."""

    name: str
    optimizer: Any
    total_env_steps: int
    learning_starts: int
    batch_size: int
    buffer_size: int
    updates_per_step: float
    max_update_lag: int | None
    publish_interval: int
    sync_interval: int
    write_interval: int
    lr: float
    max_grad_norm: float | None
    gamma: float
    double_dqn: bool
    loss_function: str
    hidden: list[int]
    learner_device: str
    stop_timeout_s: float
    report_interval: int
    target_update: TargetUpdate = field(default_factory=TargetUpdate)
    exploration: Exploration = field(default_factory=Exploration)
    eval: DQNEval = field(default_factory=DQNEval)


def check_dqn(cfg: DictConfig, phase: DQNPhase) -> None:
    backend = (cfg.get("env") or {}).get("backend")
    require(backend == "pettingzoo", "env.backend", backend,
            "pettingzoo: phase=dqn needs a multi-agent env; change env= with phase= (env=mpe_spread, or "
            "+experiment=independent_dqn)")
    for name in ("total_env_steps", "batch_size", "buffer_size", "publish_interval", "sync_interval",
                 "write_interval", "report_interval"):
        require(getattr(phase, name) >= 1, f"phase.{name}", getattr(phase, name), "an integer >= 1")
    require(phase.learning_starts >= 0, "phase.learning_starts", phase.learning_starts, "an integer >= 0")
    require(phase.batch_size <= phase.buffer_size, "phase.batch_size", phase.batch_size,
             f"1..phase.buffer_size ({phase.buffer_size})")
    require(phase.updates_per_step > 0, "phase.updates_per_step", phase.updates_per_step, "a float > 0")
    min_lag = max(0, phase.batch_size - phase.learning_starts)  # else the actor waits for ever
    require(phase.max_update_lag is None or phase.max_update_lag >= min_lag, "phase.max_update_lag",
            phase.max_update_lag, f"null (the actor never waits) or env steps >= {min_lag} "
            "(a learner needs batch_size transitions before its first update)")
    require(phase.lr > 0, "phase.lr", phase.lr, "a float > 0")
    require(0 < phase.gamma <= 1, "phase.gamma", phase.gamma, "a float in (0, 1]")
    require(phase.loss_function in ("l2", "smooth_l1"), "phase.loss_function", phase.loss_function, "l2, smooth_l1")
    require(phase.max_grad_norm is None or phase.max_grad_norm > 0, "phase.max_grad_norm",
             phase.max_grad_norm, "null or a float > 0")
    require(len(phase.hidden) >= 1 and all(h >= 1 for h in phase.hidden), "phase.hidden", phase.hidden,
             "a non-empty list of layer widths >= 1")
    require(phase.learner_device in ("auto", "cpu", "cuda", "mps") or phase.learner_device.startswith("cuda:"),
             "phase.learner_device", phase.learner_device, "auto (CUDA, then MPS, then CPU), cpu, cuda, cuda:N, mps")
    require(phase.stop_timeout_s > 0, "phase.stop_timeout_s", phase.stop_timeout_s, "a float > 0 (seconds)")
    tu, ex = phase.target_update, phase.exploration
    require(tu.kind in ("soft", "hard"), "phase.target_update.kind", tu.kind, "soft, hard")
    require(0 < tu.tau <= 1, "phase.target_update.tau", tu.tau, "a float in (0, 1]")
    require(tu.hard_interval >= 1, "phase.target_update.hard_interval", tu.hard_interval, "an integer >= 1")
    for name in ("eps_init", "eps_end"):
        require(0 <= getattr(ex, name) <= 1, f"phase.exploration.{name}", getattr(ex, name), "a float in [0, 1]")
    require(ex.annealing_steps >= 1, "phase.exploration.annealing_steps", ex.annealing_steps, "an integer >= 1")
    require(phase.eval.episodes >= 1, "phase.eval.episodes", phase.eval.episodes, "an integer >= 1")


def check_dqn_stage(cfg: DictConfig) -> dict[str, Any]:
    """The typed ``hardware`` and ``phase`` of a dqn config used on its own (benchmarks, tests);
    a run's plan validates its stages through the phase registry instead."""
    name = (cfg.get("phase") or {}).get("name")
    if name != "dqn":
        raise ConfigError(f"phase={name!r} is not an independent-learners phase; accepted: dqn")
    hardware = check_hardware(cfg)
    phase = checked(cfg, "phase", DQNPhase)
    check_dqn(cfg, phase)
    return {"hardware": hardware, "phase": phase}
