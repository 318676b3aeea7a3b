"""``env=mahjong``: the backend (entry point ``meeple.plugins: mahjong``) that builds
`meeple_mahjong.batch_env.MahjongEnv`, or `meeple_mahjong.league_env.LeagueEnv` with
``env.league: true``, from the env config (docs/mahjong_env.md has the keys and the options).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torchrl.envs import EnvBase

from meeple.errors import ConfigError

from .batch_env import MahjongEnv
from .league_env import LeagueEnv
from .specs import slots_per_table

ENV_OPTIONS = (
    "learner_seats",
    "opponents",
    "rules",
    "threads",
    "score_scale",
    "rank_reward",
    "hand_reward",
    "oracle",
    "oracle_keep",
    "opponent_checkpoints",
    "league",
    "branch",
    "guide",
)


class MahjongBackend:
    """Entry point ``meeple.plugins: mahjong`` (``conf/env/mahjong.yaml``)."""

    name = "mahjong"

    def batch_unit(self, env_cfg: Mapping[str, Any]) -> int:
        """Batches are whole tables (`meeple_mahjong.specs.slots_per_table`)."""
        return slots_per_table(env_cfg)

    def make_env(
        self, env_cfg: Mapping[str, Any], *, num_envs: int, device: str = "cpu"
    ) -> EnvBase:
        # Options left out of the config take MahjongEnv's defaults (one place for them).
        options = {k: env_cfg[k] for k in ENV_OPTIONS if env_cfg.get(k) is not None}
        if not options.pop("league", False):
            return MahjongEnv(num_envs, device=device, **options)
        if options.pop("oracle_keep", 1.0) != 1.0:
            raise ConfigError("env.oracle_keep with env.league=true: a league's learner sees what it reads; "
                              "accepted: env.oracle_keep=1.0 in a league")
        for key in ("branch", "guide"):
            if options.pop(key, None) is not None:
                raise ConfigError(f"env.{key} with env.league=true: a league has no {key}; accepted: "
                                  f"env.{key}=null in a league")
        # The league seats its networks per game (LeagueEnv.set_league): `opponents` is unused.
        options.pop("opponents", None)
        if options.pop("opponent_checkpoints", None):
            raise ConfigError(
                "env.opponent_checkpoints with env.league=true: a league seats its networks through "
                "LeagueEnv.set_league; accepted: {} (the default)"
            )
        return LeagueEnv(num_envs, device=device, **options)


backend = MahjongBackend()
