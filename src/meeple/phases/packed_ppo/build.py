"""PPO on a device-resident packed-frame env (``phase=packed_ppo``): env factory, CNN, learner, datamodule."""

from __future__ import annotations

from hydra.utils import instantiate
from omegaconf import DictConfig

from meeple.envs.packed_env import PackedEnv
from meeple.errors import ConfigError
from meeple.phases.packed_ppo.data import PackedLearner, PackedRolloutDataModule
from meeple.phases.parts import PhaseParts
from meeple.phases.ppo.build import build_ppo_module
from meeple.seeding import Component, PhaseSeeds, seed_process


def make_env_factory(cfg: DictConfig):
    """``env.factory`` (a ``_target_`` node, partial) -> ``factory(num_envs=, device=)``."""
    factory = cfg.env.get("factory")
    if factory is None or "_target_" not in factory:
        raise ConfigError(
            "env.factory is missing: a packed env names its constructor with a _target_ node "
            "taking num_envs= and device= (see conf/env/goal_grid.yaml)"
        )
    return instantiate(factory, _partial_=True)


def build_packed_ppo(cfg: DictConfig, typed: dict, seeds: PhaseSeeds) -> PhaseParts:
    """The phase's parts for a packed-frame env (docs/packed.md)."""
    phase = typed["phase"]
    env_factory = make_env_factory(cfg)
    probe = env_factory(num_envs=1, device="cpu")  # shapes only, before the model is built
    if not isinstance(probe, PackedEnv):
        raise ConfigError(
            f"env.factory built {type(probe).__name__}, which does not implement "
            "meeple.envs.packed_env.PackedEnv (reset, step, render_packed_into, episode_stats)"
        )
    seed_process(seeds.seed(Component.MODEL_INIT))
    net = instantiate(cfg.model)(probe.frames_per_obs, probe.num_actions)
    module = build_ppo_module(cfg, phase, net)
    datamodule = PackedRolloutDataModule(
        learner=PackedLearner(module.net, module.prepare_rollout),
        env_factory=env_factory,
        seeds=seeds,
        num_envs=int(cfg.env.num_envs),
        frames_per_obs=probe.frames_per_obs,
        rollout_steps=phase.rollout_steps,
        ppo_epochs=phase.ppo_epochs,
        minibatch_size=phase.minibatch_size,
        mode=phase.mode,
        max_policy_lag=phase.max_policy_lag,
    )
    rollouts = max(phase.total_frames // datamodule.frames_per_batch, 1)
    return PhaseParts(module=module, datamodule=datamodule, max_epochs=rollouts)
