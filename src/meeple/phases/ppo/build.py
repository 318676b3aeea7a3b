"""PPO on any env backend: collector rollouts -> ``PPOModule``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig

from meeple.data.collectors import collector_options
from meeple.env_factory import EnvSource, env_snapshots, env_source
from meeple.errors import ConfigError
from meeple.nets.compile import compile_networks
from meeple.phases.aux import AuxTarget
from meeple.phases.parts import PhaseParts
from meeple.phases.ppo.data import RolloutDataModule, RolloutLearner
from meeple.phases.ppo.schema import PPOPhase
from meeple.seeding import Component, PhaseSeeds, seed_process


def build_ppo_module(cfg: DictConfig, phase: PPOPhase, *networks, **extra):
    """``phase.module`` around ``networks`` with the optimiser, LR schedule, clipping and loss
    terms (``extra``: what a phase built on PPO adds)."""
    written = [k if isinstance(k, str) else "/".join(k) for k in getattr(networks[0], "out_keys", [])]
    for name, aux in phase.aux.items():
        if aux.output not in written:
            raise ConfigError(f"phase.aux.{name}.output={aux.output!r} is not an output of the model's actor "
                              f"(it writes {', '.join(written) or 'no named outputs'}); accepted: one of those, or a model option "
                              "that adds that head")  # fmt: skip
    return instantiate(cfg.phase.module)(
        *networks,
        optimizer=instantiate(cfg.phase.optimizer),
        anneal_lr=phase.anneal_lr,
        max_grad_norm=phase.max_grad_norm,
        **vars(phase.loss),
        **_reference_kl(phase),
        **({"diagnostics_every": every} if (every := phase.diagnostics.every_n_rollouts) else {}),
        **({"lr_groups": phase.lr_groups} if phase.lr_groups else {}),
        **({"critic_warmup_rollouts": n} if (n := phase.critic_warmup_rollouts) else {}),
        **({"aux": _aux_terms(cfg.phase.aux)} if phase.aux else {}),
        **extra,
    )


def _aux_terms(nodes: DictConfig) -> dict[str, AuxTarget]:
    """``phase.aux`` as the module's terms (each ``transform`` node instantiated)."""
    return {
        name: AuxTarget(node.output, node.target, node.loss, float(node.coef),
                      instantiate(node.transform) if node.get("transform") is not None else None)  # fmt: skip
        for name, node in nodes.items()
    }


def _reference_kl(phase: PPOPhase) -> dict:
    """The KL-to-reference options, for the modules that have them (set only when on)."""
    kl = phase.reference_kl
    return dict(reference_kl_coef=kl.coef, reference_kl_anneal_fraction=kl.anneal_fraction) if kl.coef > 0 else {}


def build_ppo(cfg: DictConfig, typed: dict, seeds: PhaseSeeds,
              module_extra: Callable[[EnvSource], dict[str, Any]] | None = None,
              env_hooks: Callable[[Any], dict[str, Any]] | None = None) -> PhaseParts:
    """``module_extra(envs)``: keyword arguments a phase built on PPO adds to its module;
    ``env_hooks(module)``: the module's env hooks the datamodule calls (:class:`RolloutLearner`'s
    ``prepare_env`` and ``remote_env_hook``)."""
    phase: PPOPhase = typed["phase"]
    envs = env_source(cfg.env, cfg.transport, seed=seeds.seed(Component.ENV))
    seed_process(seeds.seed(Component.MODEL_INIT))
    actor, critic = instantiate(cfg.model)(envs.observation_spec, envs.action_spec)
    if typed["hardware"].compile:
        compile_networks(actor, critic)

    module = build_ppo_module(cfg, phase, actor, critic, **(module_extra(envs) if module_extra else {}))
    if env_hooks is None and callable(getattr(module, "prepare_env", None)):
        # a module that steers its in-process envs (e.g. hands them its actor) says so by having the hook
        env_hooks = lambda m: dict(prepare_env=m.prepare_env)  # noqa: E731
    learner = RolloutLearner(policy=module.policy, advantages=module.compute_advantages,
                             **(env_hooks(module) if env_hooks else {}))
    datamodule = RolloutDataModule(
        learner=learner,
        env_fn=envs.env_fn,
        seeds=seeds,
        num_workers=int(cfg.env.num_workers),
        num_envs=int(cfg.env.num_envs),
        rollout_steps=phase.rollout_steps,
        ppo_epochs=phase.ppo_epochs,
        minibatch_size=phase.minibatch_size,
        collector_type=cfg.collector.type,
        collector_options=collector_options(cfg.collector),
        env_snapshots=env_snapshots(envs.env_cfg, envs.transport_cfg),
        batch_unit=envs.unit,
    )
    rollouts = max(phase.total_frames // datamodule.frames_per_batch, 1)
    return PhaseParts(module=module, datamodule=datamodule, max_epochs=rollouts, ranks=lambda: datamodule.ranks)
