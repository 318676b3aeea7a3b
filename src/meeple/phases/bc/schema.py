"""Typed schema of ``conf/phase/bc.yaml`` and its cross-field checks.

``validate`` (meeple.config.schema) merges the phase node into :class:`BCPhase` (unknown keys
and wrong types fail there) and then calls :func:`check_bc` for the value rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig

from meeple.errors import ConfigError

SCHEDULES = ("cosine", "constant")


@dataclass
class BCRecord:
    """How to record the dataset when ``data.path`` does not exist (exactly one policy source)."""

    policy: Any = None  # a `_target_` node: a callable td -> action, or a TorchRL module
    checkpoint: str | None = None  # a training checkpoint (.pt) or run directory
    episodes: int = 50
    num_envs: int = 8  # envs stepped together while recording
    max_steps: int = 1000  # an episode longer than this is cut (kept, marked truncated)
    gamma: float = 0.99  # discount of the stored return-to-go
    deterministic: bool = True  # greedy actions of stochastic policies (checkpoints)
    seed: int | None = 0  # envs of the recording; null: the phase's ENV seed


@dataclass
class BCData:
    path: str = "???"
    record: BCRecord | None = None
    val_fraction: float = 0.1  # share of episodes held out for validation
    split_seed: int = 0  # which episodes are held out (fixed across training seeds)


@dataclass
class BCEarlyStop:
    patience: int | None = 5  # epochs without a lower val/policy_ce; null: never stop early
    min_delta: float = 0.0


@dataclass
class BCEval:
    every_n_epochs: int = 1
    episodes: int = 20
    max_steps: int = 500
    stop_at_return: float | None = None


@dataclass
class BCPhase:
    name: str
    module: Any
    optimizer: Any
    data: BCData = field(default_factory=BCData)
    max_epochs: int = 30
    batch_size: int = 256
    lr: float = 3.0e-3
    weight_decay: float = 1.0e-4
    warmup: float = 0.05  # share of all optimiser steps with a linear warm-up
    schedule: str = "cosine"  # cosine | constant (after the warm-up)
    value_coef: float = 0.5  # 0: policy only
    max_grad_norm: float | None = 1.0
    early_stop: BCEarlyStop = field(default_factory=BCEarlyStop)
    eval: BCEval = field(default_factory=BCEval)


def _require(ok: bool, key: str, value: Any, accepted: str) -> None:
    if not ok:
        raise ConfigError(f"{key}={value!r} is not allowed; accepted: {accepted}")


def check_bc(cfg: DictConfig, phase: BCPhase) -> None:
    """Value rules of the BC phase; raises ConfigError naming the key, the value and what is accepted."""
    for name in ("max_epochs", "batch_size"):
        _require(
            getattr(phase, name) >= 1, f"phase.{name}", getattr(phase, name), "an integer >= 1"
        )
    _require(phase.lr > 0, "phase.lr", phase.lr, "a float > 0")
    _require(phase.weight_decay >= 0, "phase.weight_decay", phase.weight_decay, "a float >= 0")
    _require(
        0 <= phase.warmup < 1,
        "phase.warmup",
        phase.warmup,
        "a float in [0, 1) (share of all steps)",
    )
    _require(phase.schedule in SCHEDULES, "phase.schedule", phase.schedule, ", ".join(SCHEDULES))
    _require(
        phase.value_coef >= 0, "phase.value_coef", phase.value_coef, "a float >= 0 (0: policy only)"
    )
    _require(
        phase.max_grad_norm is None or phase.max_grad_norm > 0,
        "phase.max_grad_norm",
        phase.max_grad_norm,
        "null or a float > 0",
    )
    for name in ("every_n_epochs", "episodes", "max_steps"):
        value = getattr(phase.eval, name)
        _require(value >= 1, f"phase.eval.{name}", value, "an integer >= 1")

    data = phase.data
    _require(
        bool(data.path) and data.path != "???",
        "phase.data.path",
        data.path,
        "a folder holding (or to hold) a demonstration dataset",
    )
    _require(
        0 <= data.val_fraction < 1,
        "phase.data.val_fraction",
        data.val_fraction,
        "a float in [0, 1)",
    )
    stop = phase.early_stop
    _require(
        stop.patience is None or stop.patience >= 1,
        "phase.early_stop.patience",
        stop.patience,
        "null (never stop early) or an integer >= 1",
    )
    _require(stop.min_delta >= 0, "phase.early_stop.min_delta", stop.min_delta, "a float >= 0")
    if stop.patience is not None and data.val_fraction == 0:
        raise ConfigError(
            "phase.early_stop.patience needs a validation split, but phase.data.val_fraction=0; "
            "accepted: phase.data.val_fraction in (0, 1), or phase.early_stop.patience=null"
        )
    if data.record is not None:
        _check_record(data.record)

    env = cfg.get("env")
    if env is None or "backend" not in env:
        raise ConfigError("env.backend is missing; choose an env with env=<name>")


def _check_record(record: BCRecord) -> None:
    sources = [name for name in ("policy", "checkpoint") if getattr(record, name) is not None]
    if len(sources) != 1:
        raise ConfigError(
            f"phase.data.record sets {' and '.join(sources) or 'no policy'}; accepted: exactly one of "
            "phase.data.record.policy (a _target_ node) or phase.data.record.checkpoint (a path)"
        )
    if record.policy is not None and not (
        isinstance(record.policy, dict) and "_target_" in record.policy
    ):
        raise ConfigError(
            f"phase.data.record.policy={record.policy!r} is not allowed; accepted: a node with _target_ "
            "naming a callable td -> action or a TorchRL module, e.g. meeple_gym.experts.CartPoleExpert"
        )
    for name in ("episodes", "num_envs", "max_steps"):
        value = getattr(record, name)
        _require(value >= 1, f"phase.data.record.{name}", value, "an integer >= 1")
    _require(0 < record.gamma <= 1, "phase.data.record.gamma", record.gamma, "a float in (0, 1]")
