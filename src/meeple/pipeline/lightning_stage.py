"""A Lightning stage: build the phase's module, data and callbacks, then ``Trainer.fit``."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import lightning as L
import torch
from hydra.utils import instantiate
from lightning.fabric.utilities.exceptions import MisconfigurationException
from lightning.pytorch.trainer.states import TrainerStatus
from omegaconf import DictConfig

from meeple.callbacks.evaluation import ReturnEvaluation
from meeple.callbacks.progress import StageLabel
from meeple.distributed import resume_hint, world_size
from meeple.errors import ConfigError, PeerLost
from meeple.logs import quiet_library_output
from meeple.phases.hooks import check_hooks
from meeple.phases.registry import phase_kind
from meeple.seeding import Component, PhaseSeeds, seed_process
from meeple.tracking.keys import EVAL_RETURN

log = logging.getLogger("meeple")


@dataclass
class StageBuild:
    """Everything a Lightning stage needs, built but not started (config tests stop here)."""

    seeds: PhaseSeeds
    module: L.LightningModule
    datamodule: L.LightningDataModule
    callbacks: dict[str, L.Callback]  # the phase's required ones, its phase.callbacks, the bag
    trainer_kwargs: dict[str, Any]
    ranks: Callable[[], list[dict] | None] | None = None  # PhaseParts.ranks


def build_stage(cfg: DictConfig, typed: dict[str, Any], seeds: PhaseSeeds) -> StageBuild:
    hw = typed["hardware"]
    # More intra-op threads than cores only adds contention (a GPU profile on a small host).
    torch.set_num_threads(min(hw.torch_threads, os.cpu_count() or 1))
    torch.set_float32_matmul_precision(hw.matmul_precision)
    kind = phase_kind(cfg.phase.name)
    parts = kind.builder()(cfg, typed, seeds)
    check_hooks(kind, parts.module)  # what the stage will call on it (runner, transition)

    # The phase's required callbacks first (e.g. AlphaZero's gate before evaluations), then the
    # ones its yaml names, then the run's bag; a phase's callback replaces the bag's of that name.
    callbacks = dict(parts.callbacks)
    named = set(callbacks)  # a name the phase sets, even to null, is not taken from the bag
    for bag in (cfg.phase.get("callbacks"), cfg.get("callbacks")):
        for name, node in (bag or {}).items():
            if node is not None and name not in named:
                callbacks[name] = instantiate(node)
            named.add(name)
    if world_size(hw) > 1:
        from meeple.callbacks.ranks import RanksInSync

        callbacks["ranks_in_sync"] = RanksInSync()
    trainer_kwargs = dict(
        accelerator=hw.accelerator,
        devices=hw.devices,
        strategy=_strategy(hw),
        num_nodes=hw.num_nodes,
        precision=hw.precision,
        max_epochs=parts.max_epochs,
        callbacks=list(callbacks.values()),
        enable_progress_bar="progress" in callbacks,
        **parts.trainer,
    )
    return StageBuild(seeds, parts.module, parts.datamodule, callbacks, trainer_kwargs, parts.ranks)


def _strategy(hw: Any) -> Any:
    if hw.strategy != "ddp":
        return hw.strategy
    from meeple.pipeline.ddp import WatchedDDPStrategy

    return WatchedDDPStrategy()


def fit_stage(build: StageBuild, cfg: DictConfig, *, logger: Any, checkpoints: Any, label: str) -> tuple[dict, int]:
    """Train one stage; return its final metrics and the optimiser steps it took in all."""
    progress = build.callbacks.get("progress")
    if isinstance(progress, StageLabel):
        progress.stage_label = label
    quiet_library_output()  # now that the phase imported torchrl
    seed_process(build.seeds.seed(Component.DATA))  # action sampling in the collector
    kwargs = dict(build.trainer_kwargs)
    stop = StopAtEpochEnd()
    kwargs["callbacks"] = [stop, *kwargs["callbacks"]]
    if checkpoints is not None:  # Lightning's checkpointing, through meeple's CheckpointIO and callback
        kwargs.update(callbacks=[*kwargs["callbacks"], checkpoints.callback], plugins=[checkpoints.io],
                      enable_checkpointing=True)
    trainer: L.Trainer = instantiate(cfg.trainer, logger=logger or False, **kwargs)
    resume = checkpoints.resume_from if checkpoints is not None else None
    try:
        with stop.on_ctrl_c():
            trainer.fit(build.module, datamodule=build.datamodule, ckpt_path=str(resume) if resume else None)
    except MisconfigurationException:
        if resume is None or trainer.max_epochs is None or trainer.current_epoch <= trainer.max_epochs:
            raise
        raise ConfigError(
            f"resume=true: {resume} has trained {trainer.current_epoch} epochs (rollouts, or "
            f"iterations), more than this config's budget of {trainer.max_epochs} "
            f"(phase.total_frames={cfg.phase.get('total_frames')}); accepted: a budget of at least "
            f"{trainer.current_epoch} epochs (e.g. the run's own phase.total_frames), or resume=false"
        ) from None
    except RuntimeError as err:
        if trainer.world_size > 1 and _peer_lost(err):
            raise PeerLost(f"learner rank {trainer.global_rank} lost the other learner processes ({_first_line(err)}); "
                           f"stopping. {resume_hint()}") from None
        raise
    except SystemExit:
        # A second Ctrl-C: Lightning turns it into sys.exit(1) after finalizing the logger as failed.
        if trainer.state.status == TrainerStatus.INTERRUPTED:
            _mark_killed(logger)
            raise KeyboardInterrupt from None
        raise
    if stop.requested:  # the stage is not finished: resume=true continues it
        _mark_killed(logger)
        raise KeyboardInterrupt

    metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
    evaluation = build.callbacks.get("eval")
    if isinstance(evaluation, ReturnEvaluation) and evaluation.last_return is not None:
        metrics[EVAL_RETURN] = evaluation.last_return
        log.info("final greedy evaluation: mean return %.1f over %d episodes", evaluation.last_return,
                 evaluation.episodes)
    return metrics, int(trainer.global_step)


class StopAtEpochEnd(L.Callback):
    """Ctrl-C ends the stage at the end of the current epoch (a rollout or an iteration), where
    the checkpoint callback, which runs after this one, saves it: resume=true then continues
    exactly. A KeyboardInterrupt raised wherever the signal lands can be swallowed or turned into
    another error by library context managers (seen: TorchRL's loss inside tensordict's), so the
    first Ctrl-C only sets a flag; a second one interrupts at once."""

    def __init__(self) -> None:
        self.requested = False

    @contextlib.contextmanager
    def on_ctrl_c(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield  # signal handlers belong to the main thread (sweeps run trials there too)
            return
        previous = signal.getsignal(signal.SIGINT)

        def request(signum: int, frame: Any) -> None:
            self.requested = True
            signal.signal(signal.SIGINT, previous)  # the next Ctrl-C interrupts at once
            print("meeple: stopping at the end of this epoch (Ctrl-C again to stop now)", file=sys.stderr,
                  flush=True)

        signal.signal(signal.SIGINT, request)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.requested:
            trainer.should_stop = True


def _mark_killed(logger: Any) -> None:
    if logger is not None and getattr(logger, "run_id", None):
        try:
            logger.experiment.set_terminated(logger.run_id, "KILLED")
        except Exception as err:  # tracking must not hide the interruption
            log.warning("MLflow run %s not marked KILLED: %s", logger.run_id, err)


def _peer_lost(err: RuntimeError) -> bool:
    """A collective failed because another rank went away (gloo: connection reset or closed)."""
    text = str(err)
    return isinstance(err, torch.distributed.DistBackendError) or ("gloo" in text and "Connection" in text)


def _first_line(err: BaseException) -> str:
    return str(err).strip().splitlines()[0][:300]
