"""The league phase's builder: PPO's, with the league's options, its seating seed and the
module's env hooks (the datamodule seats the league's networks through them)."""

from __future__ import annotations

from omegaconf import DictConfig

from meeple.phases.league.schema import LeaguePhase
from meeple.phases.parts import PhaseParts
from meeple.phases.ppo.build import build_ppo
from meeple.seeding import Component, PhaseSeeds


def build_league(cfg: DictConfig, typed: dict, seeds: PhaseSeeds) -> PhaseParts:
    phase: LeaguePhase = typed["phase"]
    return build_ppo(cfg, typed, seeds, lambda _envs: dict(
        league=phase.league, schedule=phase.schedule, seating_seed=seeds.seed(Component.OPPONENT)),
        env_hooks=lambda module: dict(prepare_env=module.prepare_env, remote_env_hook=module.remote_env_hook))
