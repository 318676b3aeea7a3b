"""The distill phase's builder: PPO's, with the student's module told how to build its teacher."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from meeple.checkpoint.actor import actor_from_checkpoint
from meeple.env_factory import EnvSource
from meeple.errors import ConfigError
from meeple.phases.distill.schema import DistillPhase
from meeple.phases.parts import PhaseParts
from meeple.phases.ppo.build import build_ppo
from meeple.seeding import Component, PhaseSeeds


def build_distill(cfg: DictConfig, typed: dict, seeds: PhaseSeeds) -> PhaseParts:
    phase: DistillPhase = typed["phase"]
    key = phase.distill.privileged_key

    def module_extra(envs: EnvSource) -> dict[str, Any]:
        if key not in envs.observation_spec.keys():
            raise ConfigError(f"phase=distill: the teacher reads the observation {key!r}, which env "
                              f"{envs.env_cfg.get('backend')!r} does not give; it gives "
                              f"{', '.join(map(str, envs.observation_spec.keys()))} (an env option turns it on, e.g. env.oracle=true)")

        def make_teacher(checkpoint: dict[str, Any], file: Path) -> Any:
            """The teacher's actor from its gate, built for this env's specs (loaded strictly)."""
            actor, _ = actor_from_checkpoint(checkpoint, file, lambda _config: (envs.observation_spec,
                                                                                  envs.action_spec))
            return actor

        return dict(distill=phase.distill, make_teacher=make_teacher,
                    dropout_seed=seeds.seed(Component.FEATURE_DROPOUT))

    return build_ppo(cfg, typed, seeds, module_extra)
