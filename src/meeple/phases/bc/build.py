"""``build_bc``: from the composed config to the BC module, its data and its own callbacks."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from lightning.pytorch.callbacks import EarlyStopping
from omegaconf import DictConfig

from meeple.checkpoint.actor import checkpoint_file
from meeple.env_factory import env_source
from meeple.nets.actor_critic import observation_shape
from meeple.nets.compile import compile_networks
from meeple.phases.bc.data import DemonstrationDataModule
from meeple.phases.bc.dataset import DatasetError, Demonstrations, load_demonstrations
from meeple.phases.bc.module import BEST_METRIC, BEST_MODE, BCModule
from meeple.phases.bc.record import checkpoint_policy, record_to, scripted_policy
from meeple.phases.bc.schema import BCPhase, BCRecord
from meeple.phases.parts import PhaseParts
from meeple.seeding import Component, PhaseSeeds, seed_process

log = logging.getLogger(__name__)


def build_bc_module(phase_cfg: DictConfig, phase: BCPhase, actor, critic) -> BCModule:
    """``phase.module`` around the networks, with the optimiser and the loss settings."""
    return instantiate(phase_cfg.module)(
        actor,
        critic,
        optimizer=instantiate(phase_cfg.optimizer),
        value_coef=phase.value_coef,
        max_grad_norm=phase.max_grad_norm,
        warmup=phase.warmup,
        schedule=phase.schedule,
    )


def ensure_demonstrations(
    path: str | Path,
    record: BCRecord | None,
    env_cfg: dict,
    *,
    seed: int,
    transport: dict | None = None,
) -> Demonstrations:
    """The dataset at ``path``; recorded there first (envs seeded with ``record.seed``, else
    ``seed``) when it does not exist and ``record`` says how. An existing dataset that another
    policy recorded, or with another number of episodes, is an error rather than reused."""
    path = Path(path)
    if record is None:
        return load_demonstrations(path)
    if record.policy is not None:
        expected = f"scripted:{record.policy['_target_']}"
    else:
        expected = f"checkpoint:{checkpoint_file(record.checkpoint).resolve()}@"
    if not path.exists():
        if record.policy is not None:
            policy, recorded_by = scripted_policy(record.policy)
        else:
            policy, recorded_by = checkpoint_policy(record.checkpoint, env_cfg, transport)
        record_to(
            path,
            env_cfg,
            policy,
            recorded_by=recorded_by,
            episodes=record.episodes,
            seed=record.seed if record.seed is not None else seed,
            num_envs=record.num_envs,
            max_steps=record.max_steps,
            gamma=record.gamma,
            deterministic=record.deterministic,
            transport=transport,
        )
    demos = load_demonstrations(path)
    meta = demos.meta
    if not meta.recorded_by.startswith(expected) or meta.episodes != record.episodes:
        raise DatasetError(
            f"{path} holds {meta.episodes} episodes recorded by {meta.recorded_by}, but "
            f"phase.data.record asks for {record.episodes} by {expected.rstrip('@')}; accepted: "
            "delete the folder to record it again, or point phase.data.path elsewhere"
        )
    return demos


def check_fits_env(demos: Demonstrations, observation_spec, action_spec, env_cfg: dict) -> None:
    """The dataset's observations and actions are this env's."""
    from meeple.nets.actor_critic import num_actions

    shape, n = list(observation_shape(observation_spec)), num_actions(action_spec)
    meta = demos.meta
    if (meta.observation_shape, meta.num_actions) != (shape, n):
        raise DatasetError(
            f"{demos.path}: recorded on env {meta.env} with observations {meta.observation_shape} and "
            f"{meta.num_actions} actions; env {env_cfg.get('id', env_cfg.get('backend'))} has observations "
            f"{shape} and {n} actions; accepted: a dataset recorded on this env"
        )
    has_mask = "action_mask" in observation_spec.keys()
    if has_mask != demos.has_mask:
        raise DatasetError(
            f"{demos.path}: action_mask {'missing' if has_mask else 'present'} but the env "
            f"{'provides' if has_mask else 'has no'} one; accepted: a dataset recorded on this env"
        )


def build_bc(cfg: DictConfig, typed: dict[str, Any], seeds: PhaseSeeds) -> PhaseParts:
    phase: BCPhase = typed["phase"]
    phase_cfg = cfg.phase
    envs = env_source(cfg.env, cfg.transport, seed=seeds.seed(Component.ENV))
    env_cfg, transport_cfg = envs.env_cfg, envs.transport_cfg
    observation_spec, action_spec = envs.observation_spec, envs.action_spec

    demos = ensure_demonstrations(
        phase.data.path,
        phase.data.record,
        env_cfg,
        seed=seeds.seed(Component.ENV),
        transport=transport_cfg,
    )
    check_fits_env(demos, observation_spec, action_spec, env_cfg)
    seed_process(seeds.seed(Component.MODEL_INIT))
    actor, critic = instantiate(cfg.model)(observation_spec, action_spec)
    if typed["hardware"].compile:
        compile_networks(actor, critic)
    module = build_bc_module(phase_cfg, phase, actor, critic)
    datamodule = DemonstrationDataModule(
        demos,
        seeds=seeds,
        batch_size=phase.batch_size,
        val_fraction=phase.data.val_fraction,
        split_seed=phase.data.split_seed,
        env_fn=envs.env_fn,
        batch_unit=envs.unit,
    )
    log.info(
        "behavioral cloning on %s: %d training and %d validation records (%d episodes, %s)",
        demos.path,
        len(datamodule.train_index),
        len(datamodule.val_index),
        demos.meta.episodes,
        demos.meta.recorded_by,
    )
    if phase.value_coef > 0 and not demos.has_return:
        log.warning(
            "phase.value_coef=%s but %s holds no returns: the value head is not trained",
            phase.value_coef,
            demos.path,
        )

    callbacks = {}
    if phase.early_stop.patience is not None:
        callbacks["early_stop"] = EarlyStopping(
            monitor=BEST_METRIC,
            mode=BEST_MODE,
            patience=phase.early_stop.patience,
            min_delta=phase.early_stop.min_delta,
        )
    # phase.callbacks (the greedy evaluation) are built by the stage, after these.
    return PhaseParts(
        module=module, datamodule=datamodule, max_epochs=phase.max_epochs, callbacks=callbacks
    )
