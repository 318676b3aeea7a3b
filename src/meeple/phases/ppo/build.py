"""PPO on any env backend: collector rollouts -> ``PPOModule``."""

from __future__ import annotations

from functools import partial

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from meeple.env_factory import batch_unit, env_snapshots, make_env
from meeple.nets.compile import compile_networks
from meeple.phases.parts import PhaseParts
from meeple.phases.ppo.data import RolloutDataModule
from meeple.phases.ppo.schema import PPOPhase
from meeple.plugins.registry import load_backend
from meeple.seeding import Component, PhaseSeeds, seed_process


def build_ppo_module(cfg: DictConfig, phase: PPOPhase, *networks):
    """``phase.module`` around ``networks`` with the optimiser, LR schedule, clipping and loss terms."""
    return instantiate(cfg.phase.module)(
        *networks,
        optimizer=instantiate(cfg.phase.optimizer),
        anneal_lr=phase.anneal_lr,
        max_grad_norm=phase.max_grad_norm,
        **vars(phase.loss),
        **_reference_kl(phase),
    )


def _reference_kl(phase: PPOPhase) -> dict:
    """The KL-to-reference options, for the modules that have them (set only when on)."""
    kl = phase.reference_kl
    return dict(reference_kl_coef=kl.coef, reference_kl_anneal_fraction=kl.anneal_fraction) if kl.coef > 0 else {}


def build_ppo(cfg: DictConfig, typed: dict, seeds: PhaseSeeds) -> PhaseParts:
    phase: PPOPhase = typed["phase"]
    load_backend(cfg.env.backend)  # unknown backend -> error listing installed ones
    env_cfg = OmegaConf.to_container(cfg.env, resolve=True)
    transport_cfg = OmegaConf.to_container(cfg.transport, resolve=True)
    env_fn = partial(make_env, env_cfg, transport=transport_cfg)
    # Specs come from a throwaway single env so the model is built before the collector.
    unit = batch_unit(env_cfg)
    probe = env_fn(num_envs=unit, seed=seeds.seed(Component.ENV))
    seed_process(seeds.seed(Component.MODEL_INIT))
    actor, critic = instantiate(cfg.model)(probe.observation_spec, probe.action_spec)
    probe.close()
    if typed["hardware"].compile:
        compile_networks(actor, critic)

    module = build_ppo_module(cfg, phase, actor, critic)
    datamodule = RolloutDataModule(
        env_fn=env_fn,
        seeds=seeds,
        num_workers=int(cfg.env.num_workers),
        num_envs=int(cfg.env.num_envs),
        rollout_steps=phase.rollout_steps,
        ppo_epochs=phase.ppo_epochs,
        minibatch_size=phase.minibatch_size,
        collector_type=cfg.collector.type,
        env_snapshots=env_snapshots(env_cfg, transport_cfg),
        batch_unit=unit,
    )
    rollouts = max(phase.total_frames // datamodule.frames_per_batch, 1)
    return PhaseParts(module=module, datamodule=datamodule, max_epochs=rollouts)
