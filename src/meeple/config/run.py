"""The run-level records a run plan hands on: who the run is, how it keeps checkpoints, where it
is tracked. Built (and checked) once from the composed config by ``meeple.pipeline.plan.plan_run``;
the run session (``meeple.checkpoint.session``) and the runner read these, never the config.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from meeple.config.overrides import command_line_values
from meeple.errors import ConfigError

# Run-control keys: how to start, not what to train (left out of what a checkpoint records).
RUN_CONTROL_KEYS = ("resume", "resume_dir")


@dataclass(frozen=True)
class RunIdentity:
    """Which run this is: its experiment and task (a resumed run is found by them), its seed
    and whether it continues an earlier run."""

    experiment: str
    task: str
    seed: int | None  # the config's seed (None: drawn from os.urandom)
    seed_given: bool  # chosen on the command line, not just the root default (a resume warns it is ignored)
    resume: bool  # resume=true, or resume_dir given
    resume_dir: str | None  # the run to resume (None: the newest of this experiment and task)


@dataclass(frozen=True)
class CheckpointPolicy:
    """One stage's checkpointing (``checkpoint=default``); the root's ``root`` holds the run."""

    root: Path
    keep: int
    every_n_rollouts: int
    min_interval_s: float
    monitor: str | None
    mode: str  # max | min
    gate: str | None  # copy the stage's best checkpoint to gates/<gate>.pt at its end


@dataclass(frozen=True)
class TrackingPlan:
    """Where the run is tracked (``uri`` None: not at all)."""

    uri: str | None
    experiment: str
    log_config_artifact: bool


def run_identity(cfg: DictConfig) -> RunIdentity:
    seed = cfg.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63):
        raise ConfigError(f"seed={seed!r} is not allowed; accepted: null (drawn from os.urandom) or an integer "
                          "in [0, 2**63)")
    if not isinstance(cfg.get("resume"), bool):
        raise ConfigError(f"resume={cfg.get('resume')!r} is not allowed; accepted: true, false")
    resume_dir = cfg.get("resume_dir")
    return RunIdentity(
        experiment=str(cfg.experiment_name), task=str(cfg.task_name), seed=seed,
        seed_given=seed is not None and any(key == "seed" for key, _ in command_line_values()),
        resume=cfg.resume or resume_dir is not None, resume_dir=None if resume_dir is None else str(resume_dir),
    )


def checkpoint_policy(cfg: DictConfig, *, gate: str | None = None, enabled: bool | None = None
                      ) -> CheckpointPolicy | None:
    """``cfg``'s checkpointing, or None when it keeps none; ``gate``: the gate a pipeline's
    stage writes for the next one when ``checkpoint.gate`` names none; ``enabled``: whether it
    keeps any (default: ``checkpoint.enabled``; a stage keeps them when its run does)."""
    ckpt = cfg.get("checkpoint") or {}
    if not (ckpt.get("enabled") if enabled is None else enabled):
        return None
    for key in ("keep", "every_n_rollouts"):
        value = ckpt.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"checkpoint.{key}={value!r} is not allowed; accepted: an integer >= 1")
    interval = ckpt.get("min_interval_s", 0.0)
    if isinstance(interval, bool) or not isinstance(interval, int | float) or not interval >= 0:
        raise ConfigError(f"checkpoint.min_interval_s={interval!r} is not allowed; accepted: a number of "
                          "seconds >= 0")
    if ckpt.get("mode") not in ("max", "min"):
        raise ConfigError(f"checkpoint.mode={ckpt.get('mode')!r} is not allowed; accepted: max, min")
    monitor = ckpt.get("monitor")
    return CheckpointPolicy(
        root=Path(ckpt.root), keep=int(ckpt.keep), every_n_rollouts=int(ckpt.every_n_rollouts),
        min_interval_s=float(interval), monitor=None if monitor is None else str(monitor), mode=str(ckpt.mode),
        gate=ckpt.get("gate") or gate,
    )


def tracking_plan(cfg: DictConfig) -> TrackingPlan:
    tracking = cfg.tracking
    return TrackingPlan(uri=tracking.uri or None, experiment=str(tracking.experiment),
                        log_config_artifact=bool(tracking.log_config_artifact))


def run_config(cfg: DictConfig) -> dict[str, Any]:
    """The resolved config a checkpoint records (without run-control keys)."""
    resolved = OmegaConf.to_container(cfg, resolve=True)
    for key in RUN_CONTROL_KEYS:
        resolved.pop(key, None)
    return resolved
