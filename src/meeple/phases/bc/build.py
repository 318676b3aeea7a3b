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
from meeple.errors import ConfigError
from meeple.nets.actor_critic import observation_shape
from meeple.nets.compile import compile_networks
from meeple.phases.aux import AuxTarget
from meeple.phases.bc.data import DemonstrationDataModule, ExternalDataModule
from meeple.phases.bc.dataset import DatasetError, Demonstrations, load_demonstrations
from meeple.phases.bc.module import BEST_METRIC, BEST_MODE, BCModule
from meeple.phases.bc.record import checkpoint_policy, record_to, scripted_policy
from meeple.phases.bc.schema import BCPhase, BCRecord
from meeple.phases.parts import PhaseParts
from meeple.seeding import Component, PhaseSeeds, seed_process

log = logging.getLogger(__name__)


def build_bc_module(phase_cfg: DictConfig, phase: BCPhase, actor, critic, aux=None) -> BCModule:
    """``phase.module`` around the networks, with the optimiser and the loss settings."""
    return instantiate(phase_cfg.module)(
        actor,
        critic,
        optimizer=instantiate(phase_cfg.optimizer),
        value_coef=phase.value_coef,
        max_grad_norm=phase.max_grad_norm,
        warmup=phase.warmup,
        schedule=phase.schedule,
        lr_floor=phase.lr_floor,
        no_decay_norms_biases=phase.no_decay_norms_biases,
        aux=aux,
        aux_targets={name: AuxTarget(a.output, a.target, a.loss) for name, a in phase.aux.items()},
        aux_coef=phase.aux_coef,
        weight_key=phase.weight_key,
        categories=phase.categories,
    )


def build_networks(model_cfg: DictConfig, observation_spec, action_spec, *, with_aux: bool):
    """``(actor, critic, aux)`` from ``conf/model``; ``aux`` (None unless asked for) is the module
    writing the auxiliary outputs, from a factory that takes ``with_aux=True`` and then returns
    three parts (a plugin's model factory with auxiliary heads does)."""
    factory = instantiate(model_cfg)
    if not with_aux:
        actor, critic = factory(observation_spec, action_spec)
        return actor, critic, None
    try:
        actor, critic, aux = factory(observation_spec, action_spec, with_aux=True)
    except TypeError as err:
        if "with_aux" not in str(err):
            raise
        raise ConfigError(
            f"phase.aux needs auxiliary outputs but model {model_cfg.get('_target_')!r} cannot build them "
            f"({err}); accepted: a model factory taking with_aux=True, or phase.aux_coef=0"
        ) from None
    return actor, critic, aux


def _check_aux_outputs(aux, phase: BCPhase) -> None:
    """Every ``phase.aux.*.output`` is a key the model's aux module writes."""
    written = {
        key if isinstance(key, str) else "/".join(key) for key in getattr(aux, "out_keys", [])
    }
    for name, target in phase.aux.items():
        if target.output not in written:
            raise ConfigError(
                f"phase.aux.{name}.output={target.output!r} is not an output of the model's aux module; "
                f"accepted: {', '.join(sorted(written))}"
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
    envs = env_source(cfg.env, cfg.transport, seed=seeds.seed(Component.ENV))
    env_cfg, transport_cfg = envs.env_cfg, envs.transport_cfg
    observation_spec, action_spec = envs.observation_spec, envs.action_spec
    if phase.data.datamodule is not None:
        return build_bc_from_datamodule(cfg, typed, seeds, envs)

    demos = ensure_demonstrations(
        phase.data.path,
        phase.data.record,
        env_cfg,
        seed=seeds.seed(Component.ENV),
        transport=transport_cfg,
    )
    check_fits_env(demos, observation_spec, action_spec, env_cfg)
    module = _module(cfg, typed, seeds, envs)
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

    return _parts(phase, module, datamodule)


def build_bc_from_datamodule(
    cfg: DictConfig, typed: dict[str, Any], seeds: PhaseSeeds, envs
) -> PhaseParts:
    """BC on the batches of ``phase.data.datamodule`` (called with ``batch_size`` and ``seed``);
    the env still gives the networks their specs and plays the greedy evaluation."""
    phase: BCPhase = typed["phase"]
    inner = instantiate(
        cfg.phase.data.datamodule, batch_size=phase.batch_size, seed=seeds.seed(Component.DATA)
    )
    datamodule = ExternalDataModule(inner, seeds=seeds, env_fn=envs.env_fn, batch_unit=envs.unit)
    module = _module(cfg, typed, seeds, envs)
    # Not steps_per_epoch here: a data module may build its data on first use (a corpus from
    # self-play), which belongs to the fit, not to building (configs are built in tests too).
    log.info("behavioral cloning on %s", type(inner).__name__)
    return _parts(phase, module, datamodule)


def _module(cfg: DictConfig, typed: dict[str, Any], seeds: PhaseSeeds, envs) -> BCModule:
    phase: BCPhase = typed["phase"]
    seed_process(seeds.seed(Component.MODEL_INIT))
    use_aux = phase.aux_coef > 0 and bool(phase.aux)
    actor, critic, aux = build_networks(
        cfg.model, envs.observation_spec, envs.action_spec, with_aux=use_aux
    )
    if aux is not None:
        _check_aux_outputs(aux, phase)
    if typed["hardware"].compile:
        compile_networks(*(m for m in (actor, critic, aux) if m is not None))
    return build_bc_module(cfg.phase, phase, actor, critic, aux)


def _parts(phase: BCPhase, module: BCModule, datamodule) -> PhaseParts:
    callbacks = {}
    if phase.early_stop.patience is not None:
        callbacks["early_stop"] = EarlyStopping(
            monitor=BEST_METRIC,
            mode=BEST_MODE,
            patience=phase.early_stop.patience,
            min_delta=phase.early_stop.min_delta,
        )
    trainer = {}
    if phase.val_every_n_steps is not None:
        # Counted over the whole run (not per epoch), so N may exceed an epoch's steps.
        trainer = {"val_check_interval": phase.val_every_n_steps, "check_val_every_n_epoch": None}
    # phase.callbacks (the greedy evaluation) are built by the stage, after these.
    return PhaseParts(
        module=module,
        datamodule=datamodule,
        max_epochs=phase.max_epochs,
        callbacks=callbacks,
        trainer=trainer,
    )
