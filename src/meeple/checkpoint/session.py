"""A run's checkpointing: its run directory, master seed, finished stages and what to resume from.

``python train.py ...`` creates ``{checkpoint.root}/{run_id}/``; ``resume=true`` continues the
newest run directory of the same experiment and task (or ``resume_dir=...``) with its master
seed: stages that finished (``phase{N}/done.json``) are not run again, and the stage in progress
continues from its newest checkpoint that verifies.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from meeple.checkpoint.callback import RolloutCheckpoint, select_resume_checkpoint
from meeple.checkpoint.io import AtomicCheckpointIO, write_text_atomic
from meeple.checkpoint.run_dir import RunDirectory, find_latest_run
from meeple.config.run import CheckpointPolicy, RunIdentity, TrackingPlan
from meeple.errors import ConfigError
from meeple.seeding import resolve_master_seed
from meeple.tracking.uri import absolute_sqlite_uri

log = logging.getLogger(__name__)

DONE_FILE = "done.json"
RANKS_FILE = "ranks.json"


class RunSession:
    """Built from the run plan's records before anything else (it fixes the master seed);
    :meth:`open` writes the run directory once every stage is known to build."""

    def __init__(self, identity: RunIdentity, policy: CheckpointPolicy, tracking: TrackingPlan, *,
                 stages: list[str], follow: RunDirectory | None = None) -> None:
        self.identity, self.tracking = identity, tracking
        self.resumed = identity.resume
        self.root = policy.root
        self.stages = stages
        self.io = AtomicCheckpointIO(background=True)  # saves at rollout ends overlap training
        self.run: RunDirectory | None = None
        # A rank > 0 of a multi-process run reads rank 0's run directory and writes nothing.
        self.writes = follow is None
        if follow is not None:
            self.run, self.master_seed = follow, follow.master_seed
        elif self.resumed:
            self.run = _find_run(identity, self.root)
            self.master_seed = self.run.master_seed
            if identity.seed_given and identity.seed != self.master_seed:
                log.warning("seed=%s ignored: resuming run %s with its master seed %d", identity.seed,
                            self.run.run_id, self.master_seed)
        else:
            self.master_seed = resolve_master_seed(identity.seed)

    def open(self) -> RunDirectory:
        """Create the run directory (a new run) and return it."""
        if self.run is None:
            self.run = RunDirectory.create(self.root, master_seed=self.master_seed,
                                           experiment=self.identity.experiment, task=self.identity.task)
        return self.run

    # -- stages ------------------------------------------------------------------------------
    def done(self, index: int) -> dict[str, Any] | None:
        """The record of stage ``index`` when it finished in this run directory, else None."""
        return read_done(self.run, index)

    def mark_done(self, index: int, record: dict[str, Any]) -> None:
        if not self.writes:
            return
        folder = self.run.phase_dir(index)
        folder.mkdir(parents=True, exist_ok=True)
        write_text_atomic(folder / DONE_FILE, json.dumps(record, indent=2, sort_keys=True) + "\n")

    def record_ranks(self, index: int, ranks: list[dict[str, Any]]) -> None:
        """``phase{index}/ranks.json``: the seeds each learner process of a multi-process run used."""
        if self.writes:
            write_text_atomic(self.run.phase_dir(index) / RANKS_FILE, json.dumps(ranks, indent=2) + "\n")

    def checkpoints(self, index: int, policy: CheckpointPolicy, config: dict[str, Any]) -> PhaseCheckpoints:
        """Stage ``index``'s checkpoint folder: what to resume from and the Trainer callback
        (``config``: the resolved config its checkpoints record)."""
        return PhaseCheckpoints(self, index, policy, config)

    # -- MLflow ------------------------------------------------------------------------------
    def _same_store(self) -> bool:
        # a relative sqlite URI recorded by an older run is read against this working directory
        return absolute_sqlite_uri(self.run.mlflow_tracking_uri) == absolute_sqlite_uri(self.tracking.uri)

    def mlflow_run(self, index: int | None) -> str | None:
        """The MLflow run to continue: the pipeline's (index None) or a stage's, same store only."""
        if not self._same_store():
            return None
        return self.run.mlflow_run_id if index is None else self.run.stage_mlflow_runs.get(str(index))

    def forget_mlflow_runs(self) -> None:
        """Drop every MLflow run recorded (another store, or the pipeline's run lost): the runs
        logged from here on are new, and none of them may be taken for an old one's child."""
        self.run.mlflow_run_id, self.run.stage_mlflow_runs = None, {}

    def record_mlflow_run(self, index: int | None, run_id: str | None) -> None:
        if not run_id or not self.writes:
            return
        if not self._same_store():  # its ids mean nothing in this store
            self.forget_mlflow_runs()
        if index is None:
            self.run.mlflow_run_id = run_id
        else:
            self.run.stage_mlflow_runs[str(index)] = run_id
        self.run.mlflow_tracking_uri = absolute_sqlite_uri(self.tracking.uri)
        self.run.save()


class PhaseCheckpoints:
    """One stage's checkpoints: ``resume_from`` (None: start the stage from scratch) and the
    :class:`RolloutCheckpoint` callback with the run's :class:`AtomicCheckpointIO`."""

    def __init__(self, session: RunSession, index: int, policy: CheckpointPolicy, config: dict[str, Any]) -> None:
        run = session.run
        self.io = session.io
        self.resume_from: Path | None = None
        folder = run.checkpoint_dir(index)
        if folder.is_dir():
            self.resume_from = select_resume_checkpoint(folder, index, self.io)
        if self.resume_from is not None:
            log.info("resuming run %s from %s", run.path, self.resume_from.name)
            _warn_config_changes(self.io.peek(self.resume_from).get("config"), config)
        elif session.resumed:
            log.warning("run %s has no checkpoint of phase %d yet: starting it from the beginning", run.path, index)
        if session.writes:
            run.prepare(index)
        self.callback = RolloutCheckpoint(
            run,
            phase=index,
            every_n_rollouts=policy.every_n_rollouts,
            min_interval_s=policy.min_interval_s,
            keep=policy.keep,
            monitor=policy.monitor,
            mode=policy.mode,
            gate=policy.gate,
            config=config,
        )


def read_done(run: RunDirectory, index: int) -> dict[str, Any] | None:
    """``phase{index}/done.json`` of ``run`` (written when the stage finished), or None."""
    path = run.phase_dir(index) / DONE_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except ValueError as err:
        raise ConfigError(f"{path} is unreadable ({err}); delete it to run stage {index} again") from None


def start_session(identity: RunIdentity, policy: CheckpointPolicy | None, tracking: TrackingPlan, *,
                  stages: list[str]) -> RunSession | None:
    """The run's checkpointing (nothing written yet), or None when it keeps no checkpoints (the
    plan has refused a resume or a pipeline without them)."""
    return None if policy is None else RunSession(identity, policy, tracking, stages=stages)


def follow_session(identity: RunIdentity, policy: CheckpointPolicy | None, tracking: TrackingPlan, *,
                   stages: list[str], run_dir: str | None, rank: int) -> RunSession | None:
    """Rank ``rank`` > 0's view of rank 0's checkpointing: rank 0's run directory (``run_dir``),
    read only; None when the run keeps no checkpoints."""
    if policy is None:
        return None
    if run_dir is None:
        raise ConfigError(f"rank {rank} of a multi-process run needs rank 0's run directory in MEEPLE_RUN_DIR "
                          "(rank 0 sets it for the processes it starts; on another machine set it to the "
                          "directory rank 0 printed, on a filesystem both share: docs/scaling.md)")
    return RunSession(identity, policy, tracking, stages=stages, follow=RunDirectory.open(run_dir, setting="MEEPLE_RUN_DIR"))


def _find_run(identity: RunIdentity, root: Path) -> RunDirectory:
    experiment, task = identity.experiment, identity.task
    if identity.resume_dir is not None:
        run = RunDirectory.open(identity.resume_dir)
        if run.experiment != experiment:
            raise ConfigError(
                f"resume_dir={identity.resume_dir} is a run of experiment {run.experiment!r}, not {experiment!r}; "
                f"resume it with +experiment={run.experiment} (or the same overrides it was started with)"
            )
        return run
    run = find_latest_run(root, experiment=experiment, task=task)
    if run is None:
        raise ConfigError(
            f"resume=true: no run of experiment {experiment!r} (task {task!r}) under {root}; "
            "start one without resume=true, or name one with resume_dir=<path>"
        )
    return run


def _warn_config_changes(saved: dict[str, Any] | None, config: dict[str, Any]) -> None:
    if saved is None:
        return
    changed = sorted(_diff(saved, config))
    if changed:
        log.warning("resuming with a config that differs from the checkpoint's at: %s", ", ".join(changed))


def _diff(a: Any, b: Any, prefix: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        keys = set(a) | set(b)
        return [d for k in keys for d in _diff(a.get(k), b.get(k), f"{prefix}{k}.")]
    return [] if a == b else [prefix.rstrip(".")]
