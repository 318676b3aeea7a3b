"""The league phase's builder: PPO's, with the league's options and its seating seed."""

from __future__ import annotations

from omegaconf import DictConfig

from meeple.phases.league.schema import LeaguePhase
from meeple.phases.parts import PhaseParts
from meeple.phases.ppo.build import build_ppo
from meeple.seeding import Component, PhaseSeeds


def build_league(cfg: DictConfig, typed: dict, seeds: PhaseSeeds) -> PhaseParts:
    phase: LeaguePhase = typed["phase"]
    return build_ppo(cfg, typed, seeds, lambda _envs: dict(
        league=phase.league, schedule=phase.schedule, seating_seed=seeds.seed(Component.OPPONENT)))
