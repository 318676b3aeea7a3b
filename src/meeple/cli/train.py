"""``python train.py``: compose -> validate -> seed -> track -> build -> fit -> objective."""

from __future__ import annotations

import logging
import sys
import warnings
from functools import partial

import lightning as L
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from meeple.checkpoint.session import start_checkpointing
from meeple.config.schema import check_accelerator, validate
from meeple.data.rollout import RolloutDataModule
from meeple.envs.factory import env_snapshots, make_env
from meeple.errors import MeepleError
from meeple.nets.compile import compile_networks
from meeple.plugins.registry import load_backend
from meeple.seeding import Component, PhaseSeeds, resolve_master_seed, seed_process
from meeple.tracking.keys import EVAL_RETURN
from meeple.tracking.mlflow import log_run_config, make_mlflow_logger

log = logging.getLogger("meeple")

# Known, harmless notices from libraries (our dataset's __len__ is exact: one worker).
warnings.filterwarnings("ignore", message=".*IterableDataset.*has `__len__` defined")
warnings.filterwarnings("ignore", message=".*isinstance\\(treespec, LeafSpec\\)")

PHASE_INDEX = 0  # single-phase runs; multi-phase experiments number their phases


def build_run(cfg: DictConfig, *, check_hardware: bool = True) -> dict:
    """Everything a run needs, built but not started (also used by config tests)."""
    typed = validate(cfg)
    hw, phase = typed["hardware"], typed["phase"]
    if check_hardware:
        check_accelerator(hw)
    load_backend(cfg.env.backend)  # unknown backend -> error listing installed ones

    torch.set_num_threads(hw.torch_threads)
    torch.set_float32_matmul_precision(hw.matmul_precision)
    master = resolve_master_seed(cfg.seed)
    seeds = PhaseSeeds(master, PHASE_INDEX)

    env_cfg = OmegaConf.to_container(cfg.env, resolve=True)
    env_fn = partial(make_env, env_cfg)
    # Specs come from a throwaway single env so the model is built before the collector.
    probe = env_fn(num_envs=1, seed=seeds.seed(Component.ENV))
    seed_process(seeds.seed(Component.MODEL_INIT))
    actor, critic = instantiate(cfg.model)(probe.observation_spec, probe.action_spec)
    probe.close()
    if hw.compile:
        compile_networks(actor, critic)

    module = instantiate(cfg.phase.module)(
        actor,
        critic,
        optimizer=instantiate(cfg.phase.optimizer),
        anneal_lr=phase.anneal_lr,
        max_grad_norm=phase.max_grad_norm,
        **vars(phase.loss),
    )
    datamodule = RolloutDataModule(
        env_fn=env_fn,
        seeds=seeds,
        num_workers=int(cfg.env.num_workers),
        num_envs=int(cfg.env.num_envs),
        rollout_steps=phase.rollout_steps,
        ppo_epochs=phase.ppo_epochs,
        minibatch_size=phase.minibatch_size,
        collector_type=cfg.collector.type,
        env_snapshots=env_snapshots(env_cfg),
    )
    callbacks = {name: instantiate(node) for name, node in (cfg.callbacks or {}).items() if node is not None}
    rollouts = max(phase.total_frames // datamodule.frames_per_batch, 1)
    trainer_kwargs = dict(
        accelerator=hw.accelerator,
        devices=hw.devices,
        precision=hw.precision,
        max_epochs=rollouts,
        callbacks=list(callbacks.values()),
        enable_progress_bar="progress" in callbacks,
    )
    return dict(
        master_seed=master, seeds=seeds, module=module, datamodule=datamodule,
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

