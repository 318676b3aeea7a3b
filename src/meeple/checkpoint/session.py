"""One run's checkpointing, from the config: run directory, master seed, what to resume from.

``python train.py ...`` creates ``{checkpoint.root}/{run_id}/``; ``resume=true`` continues
the newest run directory of the same experiment and task (or ``resume_dir=...``) with its
master seed, from its newest checkpoint that verifies.
"""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from meeple.checkpoint.callback import RolloutCheckpoint, select_resume_checkpoint
from meeple.checkpoint.io import AtomicCheckpointIO
from meeple.checkpoint.run_dir import RunDirectory, find_latest_run
from meeple.errors import ConfigError
from meeple.seeding import resolve_master_seed

log = logging.getLogger(__name__)

# Run-control keys: how to start, not what to train (left out of comparisons and MLflow params).
RUN_CONTROL_KEYS = ("resume", "resume_dir")


class CheckpointSession:
    """Built from the config before anything else (it fixes the master seed); :meth:`open`
    writes the run directory once the run is known to build (a bad config leaves no files)."""

    def __init__(self, cfg: DictConfig, *, phase: int) -> None:
        ckpt_cfg = cfg.checkpoint
        self.phase = phase
        self.ckpt_cfg = ckpt_cfg
        self.resumed = bool(cfg.get("resume", False)) or cfg.get("resume_dir") is not None
        self.root = Path(ckpt_cfg.root)
        experiment, task = str(cfg.experiment_name), str(cfg.task_name)
        self.io = AtomicCheckpointIO()
        self.resume_from: Path | None = None  # None: start from scratch
        self.run: RunDirectory | None = None
        self.callback: RolloutCheckpoint | None = None
        self._new_run = dict(experiment=experiment, task=task)
        if self.resumed:
            self.run = _find_run(cfg, self.root, experiment, task)
            master = self.run.master_seed
            if cfg.seed is not None and int(cfg.seed) != master:
                log.warning("seed=%s ignored: resuming run %s with its master seed %d", cfg.seed, self.run.run_id, master)
        else:
            master = resolve_master_seed(cfg.seed)
        self.master_seed = master
        self.cfg = copy.deepcopy(cfg)  # the config to run: seed pinned to the run's master seed
        with open_dict(self.cfg):
            self.cfg.seed = master
        if self.run is not None:
            folder = self.run.checkpoint_dir(phase)
            self.resume_from = select_resume_checkpoint(folder, phase, self.io) if folder.is_dir() else None
            if self.resume_from is None:
                log.warning("run %s has no checkpoint yet: starting it from the beginning", self.run.path)
            else:
                log.info("resuming run %s from %s", self.run.path, self.resume_from.name)
                _warn_config_changes(self.io.peek(self.resume_from).get("config"), self.cfg)

    def open(self) -> RolloutCheckpoint:
        """Create (or tidy) the run directory; return the checkpoint callback for the Trainer."""
        if self.run is None:
            self.run = RunDirectory.create(self.root, master_seed=self.master_seed, **self._new_run)
        self.run.prepare(self.phase)
        ckpt_cfg = self.ckpt_cfg
        self.callback = RolloutCheckpoint(
            self.run,
            phase=self.phase,
            every_n_rollouts=int(ckpt_cfg.every_n_rollouts),
            keep=int(ckpt_cfg.keep),
            monitor=ckpt_cfg.get("monitor"),
            mode=str(ckpt_cfg.get("mode", "max")),
            gate=ckpt_cfg.get("gate"),
            config=_run_config(self.cfg),
        )
        return self.callback

    def record_mlflow_run(self, run_id: str | None, tracking_uri: str | None) -> None:
        if run_id and (self.run.mlflow_run_id, self.run.mlflow_tracking_uri) != (run_id, tracking_uri):
            self.run.mlflow_run_id, self.run.mlflow_tracking_uri = run_id, tracking_uri
            self.run.save()

    def mlflow_run_to_continue(self, tracking_uri: str | None) -> str | None:
        """The MLflow run a resumed run keeps logging to (same tracking store only)."""
        if self.resumed and self.run.mlflow_run_id and self.run.mlflow_tracking_uri == tracking_uri:
            return self.run.mlflow_run_id
        return None


def start_checkpointing(cfg: DictConfig, *, phase: int) -> CheckpointSession | None:
    """The run's checkpointing (nothing written yet), or None when checkpoints are off."""
    ckpt_cfg = cfg.get("checkpoint")
    if not ckpt_cfg or not ckpt_cfg.get("enabled", False):
        if bool(cfg.get("resume", False)) or cfg.get("resume_dir") is not None:
            raise ConfigError("resume=true needs checkpoints; accepted: checkpoint=default (not checkpoint=none)")
        return None
    return CheckpointSession(cfg, phase=phase)


def _find_run(cfg: DictConfig, root: Path, experiment: str, task: str) -> RunDirectory:
    if cfg.get("resume_dir") is not None:
        return RunDirectory.open(cfg.resume_dir)
    run = find_latest_run(root, experiment=experiment, task=task)
    if run is None:
        raise ConfigError(
            f"resume=true: no run of experiment {experiment!r} (task {task!r}) under {root}; "
            "start one without resume=true, or name one with resume_dir=<path>"
        )
    return run


def _run_config(cfg: DictConfig) -> dict[str, Any]:
    resolved = OmegaConf.to_container(cfg, resolve=True)
    for key in RUN_CONTROL_KEYS:
        resolved.pop(key, None)
    return resolved


def _warn_config_changes(saved: dict[str, Any] | None, cfg: DictConfig) -> None:
    if saved is None:
        return
    changed = sorted(_diff(saved, _run_config(cfg)))
    if changed:
        log.warning("resuming with a config that differs from the checkpoint's at: %s", ", ".join(changed))


def _diff(a: Any, b: Any, prefix: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        keys = set(a) | set(b)
        return [d for k in keys for d in _diff(a.get(k), b.get(k), f"{prefix}{k}.")]
    return [] if a == b else [prefix.rstrip(".")]

