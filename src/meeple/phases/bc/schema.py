"""Typed schema of ``conf/phase/bc.yaml`` and its cross-field checks.

``validate`` (meeple.config.schema) merges the phase node into :class:`BCPhase` (unknown keys
and wrong types fail there) and then calls :func:`check_bc` for the value rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig

from meeple.errors import ConfigError
from meeple.phases.aux import AUX_LOSSES

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
    # A `_target_` node building a LightningDataModule (e.g. a plugin's corpus loader), called with
    # batch_size= and seed= (the phase's DATA seed); replaces path/record/val_fraction/split_seed.
    datamodule: Any = None
    val_fraction: float = 0.1  # share of episodes held out for validation
    split_seed: int = 0  # which episodes are held out (fixed across training seeds)


@dataclass
class BCEarlyStop:
    patience: int | None = 5  # epochs without a lower val/policy_ce; null: never stop early
    min_delta: float = 0.0


@dataclass
class BCAux:
    """One auxiliary loss: the model's ``output`` logits against the batch's ``target``."""

    output: str = "???"
    target: str = "???"
    loss: str = "ce"  # ce (class index target) | bce (0/1 target per output)


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
    lr_floor: float = 0.0  # cosine ends at lr * lr_floor
    no_decay_norms_biases: bool = False  # AdamW param groups: no weight decay on 1-D parameters
    value_coef: float = 0.5  # 0: policy only
    aux_coef: float = 0.0  # weight of the summed auxiliary losses; 0: none trained
    aux: dict[str, BCAux] = field(default_factory=dict)
    weight_key: str | None = "weight"  # batch key of per-sample loss weights, used when present
    categories: dict[str, list[int]] = field(
        default_factory=dict
    )  # name -> values of batch `category`
    val_every_n_steps: int | None = None  # null: validate once per epoch
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

    _require(0 <= phase.lr_floor <= 1, "phase.lr_floor", phase.lr_floor, "a float in [0, 1]")
    _require(
        phase.aux_coef >= 0, "phase.aux_coef", phase.aux_coef, "a float >= 0 (0: no auxiliary loss)"
    )
    for name, aux in phase.aux.items():
        _require(aux.loss in AUX_LOSSES, f"phase.aux.{name}.loss", aux.loss, ", ".join(AUX_LOSSES))
        for key in ("output", "target"):
            value = getattr(aux, key)
            _require(bool(value), f"phase.aux.{name}.{key}", value, "a batch or model output key")
    for name, ids in phase.categories.items():
        _require(bool(ids), f"phase.categories.{name}", ids, "a non-empty list of category values")
    _require(
        phase.val_every_n_steps is None or phase.val_every_n_steps >= 1,
        "phase.val_every_n_steps",
        phase.val_every_n_steps,
        "null (once per epoch) or an integer >= 1",
    )

    data = phase.data
    if data.datamodule is not None:
        _check_datamodule(data)
    else:
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
    if stop.patience is not None and data.datamodule is None and data.val_fraction == 0:
        raise ConfigError(
            "phase.early_stop.patience needs a validation split, but phase.data.val_fraction=0; "
            "accepted: phase.data.val_fraction in (0, 1), or phase.early_stop.patience=null"
        )
    if data.record is not None and data.datamodule is None:
        _check_record(data.record)

    env = cfg.get("env")
    if env is None or "backend" not in env:
        raise ConfigError("env.backend is missing; choose an env with env=<name>")


def _check_datamodule(data: BCData) -> None:
    """``phase.data.datamodule`` replaces the demonstration dataset: nothing may ask to record one."""
    if not (isinstance(data.datamodule, dict) and "_target_" in data.datamodule):
        raise ConfigError(
            f"phase.data.datamodule={data.datamodule!r} is not allowed; accepted: null (the demonstration "
            "dataset at phase.data.path) or a node with _target_ naming a LightningDataModule"
        )
    record = data.record
    sources = [
        name
        for name in ("policy", "checkpoint")
        if record is not None and getattr(record, name) is not None
    ]
    if sources:
        raise ConfigError(
            f"phase.data.datamodule and phase.data.record.{sources[0]} are both set; accepted: one data source "
            "(phase.data.record=null with a datamodule)"
        )


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
            "naming a callable td -> action or a TorchRL module (e.g. a plugin's scripted expert)"
        )
    for name in ("episodes", "num_envs", "max_steps"):
        value = getattr(record, name)
        _require(value >= 1, f"phase.data.record.{name}", value, "an integer >= 1")
    _require(0 < record.gamma <= 1, "phase.data.record.gamma", record.gamma, "a float in (0, 1]")
