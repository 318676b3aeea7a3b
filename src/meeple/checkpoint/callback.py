"""The Lightning callback that checkpoints at rollout boundaries, and resume-time selection.

A checkpoint is taken at the end of a Lightning epoch (one rollout), after that rollout's
optimiser steps, the LR scheduler step and the greedy evaluation: it holds everything the
next rollout depends on. Lightning's own ``trainer.save_checkpoint`` builds it (model,
optimiser, scheduler, loop counters, the datamodule's and callbacks' ``state_dict``) and the
:class:`~meeple.checkpoint.io.AtomicCheckpointIO` plugin writes it; this callback adds
``rng_state``, ``phase``, ``config``, ``metrics`` and ``timestamp``, keeps ``latest.pt`` and
``best.pt`` pointing at the right files, applies retention and copies the phase's gate.
It also holds the metrics a logger had not yet written (``pending_metrics``): a resumed run
sends them again instead of leaving a hole in the run's history.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Checkpoint
from lightning.pytorch.loggers import MLFlowLogger

from meeple.checkpoint.io import (
    AtomicCheckpointIO,
    CheckpointError,
    copy_verified,
    load_verified,
    replace_symlink,
)
from meeple.checkpoint.retention import (
    BEST,
    LATEST,
    checkpoint_name,
    link_target,
    list_checkpoints,
    prune,
)
from meeple.checkpoint.rng import capture_rng_state, restore_rng_state
from meeple.checkpoint.run_dir import RunDirectory

log = logging.getLogger(__name__)

MODES = ("max", "min")


class RolloutCheckpoint(Checkpoint):
    """Every ``every_n_rollouts`` rollouts (skipped while the last save is under
    ``min_interval_s`` seconds old), after the last one (or an early stop), and whenever
    ``monitor`` improves, save ``ckpt_phase{N}_step{global_step:08d}.pt``; point ``latest.pt`` at
    it (and ``best.pt`` when it improved); keep at most ``keep``.

    ``min_interval_s`` bounds what a fast phase spends on saving: a rollout of the default PPO run takes ~0.1 s
    and a save 3-8 ms (pickling ~90 state dicts), 3-6% of the run; a crash loses at most that
    long plus one rollout. Slow phases (a rollout longer than the interval) save every rollout. At the end of the phase copy
    the best checkpoint to ``gates/{gate}.pt`` (a full copy) and log it to MLflow.

    A ``Checkpoint`` subclass, so Lightning calls its ``on_train_epoch_end`` after the
    LightningModule's (the scheduler step and the rollout's metrics come first).
    """

    def __init__(self, run: RunDirectory, *, phase: int, every_n_rollouts: int = 1, min_interval_s: float = 0.0,
                 keep: int = 20, monitor: str | None = None, mode: str = "max", gate: str | None = None,
                 config: dict[str, Any] | None = None) -> None:
        if every_n_rollouts < 1:
            raise ValueError(f"checkpoint.every_n_rollouts={every_n_rollouts}; accepted: an integer >= 1")
        if not min_interval_s >= 0:
            raise ValueError(f"checkpoint.min_interval_s={min_interval_s}; accepted: a number of seconds >= 0")
        if keep < 1:
            raise ValueError(f"checkpoint.keep={keep}; accepted: an integer >= 1")
        if mode not in MODES:
            raise ValueError(f"checkpoint.mode={mode!r}; accepted: {', '.join(MODES)}")
        self.run = run
        self.phase = phase
        self.every_n_rollouts = every_n_rollouts
        self.min_interval_s = min_interval_s
        self._last_save = time.monotonic()  # reset when training starts
        self.keep = keep
        self.monitor = monitor
        self.mode = mode
        self.gate = gate
        self.config = config
        self.dir = run.checkpoint_dir(phase)
        self.best_score: float | None = None
        self.saved: list[Path] = []  # written by this process, in order
        self.gate_path: Path | None = None

    # -- when to save ----------------------------------------------------------------------
    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if trainer.global_rank == 0:  # only rank 0 of a multi-process run writes the run directory
            self.run.prepare(self.phase)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._last_save = time.monotonic()

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        rollout = trainer.current_epoch + 1
        last = trainer.should_stop or (trainer.max_epochs is not None and rollout >= trainer.max_epochs)
        score = self._score(trainer)
        improved = score is not None and (
            self.best_score is None or (score > self.best_score if self.mode == "max" else score < self.best_score)
        )
        if improved:
            self.best_score = score  # before saving: the checkpoint records its own best
        due = rollout % self.every_n_rollouts == 0 and time.monotonic() - self._last_save >= self.min_interval_s
        save = improved or last or due
        if trainer.world_size > 1:  # every rank saves together (Lightning's save is collective): rank 0's clock decides
            save = trainer.strategy.broadcast(save, src=0)
        if save:
            self.save(trainer, best=improved)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # A validation inside an epoch (BC's val_every_n_steps) that improves ``monitor`` saves then,
        # by step; one at an epoch's end is handled by on_train_epoch_end as before.
        if trainer.sanity_checking or trainer.state.fn != "fit" or trainer.fit_loop.epoch_loop.batch_progress.is_last_batch:
            return
        score = self._score(trainer)
        improved = score is not None and (
            self.best_score is None or (score > self.best_score if self.mode == "max" else score < self.best_score)
        )
        if trainer.world_size > 1:  # saving is collective: every rank follows rank 0's decision
            improved = trainer.strategy.broadcast(improved, src=0)
        if improved:
            self.best_score = score
            self.save(trainer, best=True)

    def _score(self, trainer: L.Trainer) -> float | None:
        if not self.monitor or self.monitor not in trainer.callback_metrics:
            return None
        return float(trainer.callback_metrics[self.monitor])

    def save(self, trainer: L.Trainer, *, best: bool = False) -> Path:
        path = self.dir / checkpoint_name(self.phase, trainer.global_step)
        self._last_save = time.monotonic()
        trainer.save_checkpoint(path, weights_only=False)  # full state -> on_save_checkpoint -> AtomicCheckpointIO

        if trainer.global_rank != 0:  # Lightning wrote nothing here: rank 0 owns the files
            return path

        def point_links_and_prune() -> None:  # only once the file is durable (links never dangle)
            replace_symlink(self.dir / LATEST, path.name)
            if best:
                replace_symlink(self.dir / BEST, path.name)
            prune(self.dir, self.phase, self.keep, self.run.gates_dir)

        _after_writes(trainer, point_links_and_prune)
        self.saved.append(path)
        return path

    # -- what a checkpoint holds besides Lightning's keys ----------------------------------
    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]) -> None:
        datamodule = trainer.datamodule
        streams = datamodule.seed_stream_positions() if hasattr(datamodule, "seed_stream_positions") else {}
        checkpoint["rng_state"] = capture_rng_state(streams)
        checkpoint["phase"] = self.phase
        checkpoint["config"] = self.config
        checkpoint["metrics"] = {key: float(value) for key, value in trainer.callback_metrics.items()}
        checkpoint["timestamp"] = datetime.now(UTC).isoformat()
        # Metrics a logger holds back (batched writes) are sent again after a crash (kill -9).
        pending = {type(lg).__name__: lg.pending_metrics() for lg in trainer.loggers if hasattr(lg, "pending_metrics")}
        if pending:
            checkpoint["pending_metrics"] = pending

    def on_load_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]) -> None:
        # Runs while Lightning restores (before the dataloader and the first rollout): every
        # generator continues exactly where the saved run stood.
        for logger in trainer.loggers:
            if hasattr(logger, "resume"):
                logger.resume(checkpoint.get("pending_metrics", {}).get(type(logger).__name__, []))
        datamodule = trainer.datamodule
        if trainer.global_rank > 0 and hasattr(datamodule, "reseed_rank"):
            datamodule.reseed_rank()  # rank 0's generators are in the file; this rank draws its own
            return
        state = checkpoint.get("rng_state")
        if state is None:
            log.warning("checkpoint holds no rng_state: the resumed run is not bit-exact")
            return
        restore_rng_state(state)
        if hasattr(datamodule, "restore_seed_streams"):
            datamodule.restore_seed_streams(state["seed_streams"])

    def state_dict(self) -> dict[str, Any]:
        return {"best_score": self.best_score}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.best_score = state_dict["best_score"]

    # -- gates -----------------------------------------------------------------------------
    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        try:
            _wait_for_writes(trainer)  # a checkpoint taken before the failure still lands
        except Exception as err:  # the run's own exception is the one to report
            log.warning("a checkpoint write failed too: %s", err)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        _wait_for_writes(trainer)  # best/latest and the gate below read the written files
        if trainer.global_rank == 0:
            self._write_gate(trainer)
        if trainer.world_size > 1:  # no rank starts the next stage (which reads the gate) before it exists
            trainer.strategy.barrier("meeple.gate")

    def _write_gate(self, trainer: L.Trainer) -> None:
        if not self.gate:
            return
        source = link_target(self.dir / BEST) or link_target(self.dir / LATEST)
        if source is None:
            log.warning("gate %s not written: phase %d has no checkpoint", self.gate, self.phase)
            return
        self.gate_path = write_gate(source, self.run, self.gate)
        log.info("gate %s <- %s", self.gate_path, source.name)
        for logger in trainer.loggers:
            if isinstance(logger, MLFlowLogger) and logger.run_id is not None:
                try:
                    logger.experiment.log_artifact(logger.run_id, str(self.gate_path), "gates")
                except Exception as err:  # the gate is on disk; tracking must not fail the run
                    log.warning("gate %s not logged to MLflow: %s", self.gate_path.name, err)


def _after_writes(trainer: L.Trainer, task: Any) -> None:
    """``task`` after the checkpoint writes queued so far (AtomicCheckpointIO may write in the background)."""
    after = getattr(trainer.strategy.checkpoint_io, "after_writes", None)
    if after is None:
        task()
    else:
        after(task)


def _wait_for_writes(trainer: L.Trainer) -> None:
    wait = getattr(trainer.strategy.checkpoint_io, "wait", None)
    if wait is not None:
        wait()


def gate_path(run: RunDirectory, gate: str) -> Path:
    return run.gates_dir / f"{gate}.pt"


def write_gate(source: Path, run: RunDirectory, gate: str) -> Path:
    """A full, verified copy of ``source`` as ``gates/{gate}.pt`` (never a link)."""
    destination = gate_path(run, gate)
    copy_verified(source, destination)
    return destination


def load_gate(path: str | Path, *, map_location: Any = None) -> dict[str, Any]:
    """A gate checkpoint, verified. No fallback: a corrupt or missing gate is an error."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"gate {path} does not exist")
    return load_verified(path, map_location=map_location)


# -- resume ------------------------------------------------------------------------------------
def resume_candidates(folder: Path, phase: int) -> list[Path]:
    """Every retained checkpoint, newest (highest step) first, not ``latest.pt`` first: the link
    moves in a task queued after the durable write, so a process that died in between (a DDP run
    whose peer died leaves by ``os._exit``) leaves it one save behind a complete, verified file."""
    return [p.resolve() for p in reversed(list_checkpoints(folder, phase))]


def select_resume_checkpoint(folder: Path, phase: int, io: AtomicCheckpointIO) -> Path | None:
    """The newest checkpoint that verifies and loads (preloaded into ``io``), or None when the
    folder holds none. Each failure is logged; if every file fails, the error lists them all."""
    failures: list[str] = []
    link = folder / LATEST
    if link.is_symlink() and link_target(link) is None:
        failures.append(f"{link} -> missing file {link.readlink()}")
        log.warning("%s", failures[-1])
    for path in resume_candidates(folder, phase):
        try:
            io.preload(path)
        except CheckpointError as err:
            failures.append(f"{path.name}: {err}")
            log.warning("cannot resume from %s: %s; falling back to an older checkpoint", path.name, err)
            continue
        if failures:
            log.warning("resuming from %s, an older checkpoint (%d newer failed verification)", path.name, len(failures))
        return path
    if failures:
        tried = "\n  ".join(failures)
        raise CheckpointError(f"resume: no usable checkpoint in {folder}; tried:\n  {tried}")
    return None
