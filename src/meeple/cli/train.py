"""``python train.py``: compose -> validate -> seed -> track -> build -> fit -> objective."""

from __future__ import annotations

import logging
import sys
import warnings

import lightning as L
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from meeple.checkpoint.session import start_checkpointing
from meeple.config.schema import check_accelerator, validate
from meeple.errors import MeepleError
from meeple.phases import phase_builders
from meeple.seeding import Component, PhaseSeeds, resolve_master_seed, seed_process
from meeple.tracking.keys import EVAL_RETURN
from meeple.tracking.mlflow import log_run_config, make_mlflow_logger

log = logging.getLogger("meeple")

# Known, harmless notices from libraries (our dataset's __len__ is exact: one worker).
warnings.filterwarnings("ignore", message=".*IterableDataset.*has `__len__` defined")
warnings.filterwarnings("ignore", message=".*isinstance\\(treespec, LeafSpec\\)")
# AlphaZero keeps its frozen best network in eval mode on purpose.
warnings.filterwarnings("ignore", message=r".*module\(s\) in eval mode at the start of training")

PHASE_INDEX = 0  # single-phase runs; multi-phase experiments number their phases


def build_run(cfg: DictConfig, *, check_hardware: bool = True) -> dict:
    """Everything a run needs, built but not started (also used by config tests)."""
    typed = validate(cfg)
    hw = typed["hardware"]
    if check_hardware:
        check_accelerator(hw)

    torch.set_num_threads(hw.torch_threads)
    torch.set_float32_matmul_precision(hw.matmul_precision)
    master = resolve_master_seed(cfg.seed)
    seeds = PhaseSeeds(master, PHASE_INDEX)
    parts = phase_builders()[cfg.phase.name](cfg, typed, seeds)

    bag = {name: instantiate(node) for name, node in (cfg.callbacks or {}).items() if node is not None}
    callbacks = {**parts.callbacks, **bag}  # the phase's own first: e.g. the gate before evaluations
    trainer_kwargs = dict(
        accelerator=hw.accelerator,
        devices=hw.devices,
        precision=hw.precision,
        max_epochs=parts.max_epochs,
        callbacks=list(callbacks.values()),
        enable_progress_bar="progress" in callbacks,
    )
    return dict(
        master_seed=master, seeds=seeds, module=parts.module, datamodule=parts.datamodule,
        callbacks=callbacks, trainer_kwargs=trainer_kwargs, typed=typed,
    )


def train_multiagent(cfg: DictConfig) -> dict[str, float]:
    """Independent learners (phase=dqn): processes, not a Lightning Trainer (docs/multiagent.md)."""
    from meeple.multiagent.run import train_independent  # spawn workers import only what they need

    master = resolve_master_seed(cfg.seed)
    logger = make_mlflow_logger(cfg, master_seed=master)
    if logger is not None:
        log_run_config(logger, cfg, master_seed=master, log_artifact=cfg.tracking.log_config_artifact)
        log.info("MLflow run %s in %s (experiment %r)", logger.run_id, cfg.tracking.uri, cfg.tracking.experiment)
    status = "FAILED"
    try:
        metrics = train_independent(cfg, logger=logger)
        status = "FINISHED"
    except KeyboardInterrupt:  # Ctrl-C: every worker has been stopped by now
        status = "KILLED"
        print("meeple: stopped by request; every worker process has ended", file=sys.stderr)
        raise SystemExit(130) from None
    finally:
        if logger is not None:
            logger.finalize(status)
    return metrics


# phase.name -> how a run of that phase trains (the default: Lightning, below)
PHASE_RUNNERS = {"dqn": train_multiagent}


def train(cfg: DictConfig) -> dict[str, float]:
    """Train as configured; return the final value of every logged metric."""
    if (runner := PHASE_RUNNERS.get(OmegaConf.select(cfg, "phase.name"))) is not None:
        return runner(cfg)
    seed_origin = "from config" if cfg.seed is not None else "drawn from os.urandom"
    # Run directory + what to resume from; pins cfg.seed to the run's master seed.
    session = start_checkpointing(cfg, phase=PHASE_INDEX)
    if session is not None:
        cfg = session.cfg
        seed_origin = "of the resumed run" if session.resumed else seed_origin
    parts = build_run(cfg)
    if session is not None:  # the run builds: now write its directory
        session.open()
        log.info("run directory %s", session.run.path)
    master = parts["master_seed"]
    log.info("master seed %d (%s)", master, seed_origin)
    continue_run_id = session.mlflow_run_to_continue(cfg.tracking.uri) if session else None
    logger = make_mlflow_logger(
        cfg, master_seed=master, run_dir=session.run.path if session else None, continue_run_id=continue_run_id,
    )
    if logger is not None:
        log_run_config(logger, cfg, master_seed=master, log_artifact=cfg.tracking.log_config_artifact,
                       resumed=continue_run_id is not None)
        log.info("MLflow run %s in %s (experiment %r)", logger.run_id, cfg.tracking.uri, cfg.tracking.experiment)
        if session is not None:
            session.record_mlflow_run(logger.run_id, cfg.tracking.uri)

    seed_process(parts["seeds"].seed(Component.DATA))  # action sampling in the collector
    trainer_kwargs = dict(parts["trainer_kwargs"])
    if session is not None:  # Lightning's checkpointing, through meeple's CheckpointIO and callback
        trainer_kwargs.update(
            callbacks=[*trainer_kwargs["callbacks"], session.callback], plugins=[session.io], enable_checkpointing=True,
        )
    trainer: L.Trainer = instantiate(cfg.trainer, logger=logger or False, **trainer_kwargs)
    trainer.fit(parts["module"], datamodule=parts["datamodule"],
                ckpt_path=str(session.resume_from) if session and session.resume_from else None)

    metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
    evaluation = parts["callbacks"].get("eval")
    if evaluation is not None and evaluation.last_return is not None:
        metrics[EVAL_RETURN] = evaluation.last_return
        log.info("final greedy evaluation: mean return %.1f over %d episodes", evaluation.last_return,
                 evaluation.episodes)
    return metrics


def run(cfg: DictConfig) -> float | None:
    """Train and return ``cfg.optimized_metric`` (the objective for sweeps)."""
    return train(cfg).get(cfg.optimized_metric)


def main(cfg: DictConfig) -> float | None:
    """Hydra entry point body: user errors print one clear line and exit 2."""
    try:
        return run(cfg)
    except MeepleError as err:
        if OmegaConf.select(cfg, "trial.number") is not None:
            raise  # a sweep trial: the sweeper records it FAIL with this message and goes on
        print(f"meeple: error: {err}", file=sys.stderr)
        sys.exit(2)

