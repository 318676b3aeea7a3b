"""Typed schema of conf/phase/league.yaml and its cross-field checks.

A league stage is a PPO stage (every key of :class:`PPOPhase`) whose env seats frozen networks
(docs/league.md): ``league`` says how the other seats are drawn, when the learner is promoted
into the pool and how the pool is bounded; ``schedule`` holds the league's PPO schedules
(entropy decay, cosine learning rate, fewer epochs when the policy moved too far).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import DictConfig

from meeple.config.schema import require
from meeple.errors import ConfigError
from meeple.phases.league.protocol import ANCHOR, LATEST, LEARNER, SNAPSHOT_NAME
from meeple.phases.ppo.schema import PPOPhase, check_ppo


@dataclass
class Mix:
    """Probability that a non-learner seat is the learner's latest frozen copy, a pool snapshot
    or an anchor (an empty category's share goes to ``latest``)."""

    latest: float = 0.5
    pool: float = 0.3
    anchor: float = 0.2


@dataclass
class League:
    mix: Mix = field(default_factory=Mix)
    promote_every: int = 20  # rollouts between promotions of the learner into the pool
    max_on_disk: int = 20  # snapshots + anchors kept (oldest snapshot evicted first)
    device_slots: int = 4  # networks kept built on the device (least recently used dropped)
    sigma_widen: float = 1.0  # a new snapshot's sigma = min(initial sigma, learner's sigma + this)
    greedy_opponents: bool = False  # frozen networks pick their argmax instead of sampling
    # Fixed opponents besides the stage's start, name -> checkpoint file or run directory (e.g. an
    # earlier phase's gate): anchors, never evicted, drawn with the start from mix.anchor.
    anchors: dict[str, str] = field(default_factory=dict)


@dataclass
class KLEpochs:
    """After ``after`` PPO epochs of a rollout, stop when the mean approximate KL of the epochs
    done exceeds ``threshold`` (3 epochs, 2 when approx KL > 0.03)."""

    after: int = 2
    threshold: float | None = 0.03  # null: always ppo_epochs


@dataclass
class Schedule:
    entropy_final: float | None = 0.005  # entropy_coef decays linearly to this (null: constant)
    lr: str = "cosine"  # cosine | linear | constant (over the stage's rollouts)
    kl_epochs: KLEpochs = field(default_factory=KLEpochs)


@dataclass
class LeaguePhase(PPOPhase):
    league: League = field(default_factory=League)
    schedule: Schedule = field(default_factory=Schedule)


LR_SHAPES = ("cosine", "linear", "constant")
RESERVED_NAMES = (ANCHOR, LATEST, LEARNER)
_ANCHOR_NAME = re.compile(r"^[A-Za-z0-9_-]+$")  # it goes into a metric key: league/anchor_<name>_...


def check_league(cfg: DictConfig, phase: LeaguePhase) -> None:
    check_ppo(cfg, phase)
    lg, mix = phase.league, phase.league.mix
    shares = {"latest": mix.latest, "pool": mix.pool, "anchor": mix.anchor}
    ok = all(v >= 0 for v in shares.values()) and abs(sum(shares.values()) - 1) < 1e-6
    require(ok, "phase.league.mix", shares, "shares >= 0 over latest, pool, anchor summing to 1")
    require(lg.promote_every >= 1, "phase.league.promote_every", lg.promote_every, "an integer >= 1")
    room = len(lg.anchors) + 2
    require(lg.max_on_disk >= room, "phase.league.max_on_disk", lg.max_on_disk,
            f"an integer >= {room} (the start's anchor, {len(lg.anchors)} of phase.league.anchors and a snapshot)")
    for name, path in lg.anchors.items():
        ok = bool(_ANCHOR_NAME.match(name)) and not SNAPSHOT_NAME.match(name) and name not in RESERVED_NAMES
        require(ok, f"phase.league.anchors.{name}", name,
                f"a name of letters, digits, _ or - other than {', '.join(RESERVED_NAMES)} or v0001-style "
                "snapshot names")
        require(Path(path).exists(), f"phase.league.anchors.{name}", path,
                "an existing checkpoint file (.pt) or run directory")
    require(lg.device_slots >= 1, "phase.league.device_slots", lg.device_slots, "an integer >= 1")
    require(lg.sigma_widen >= 0, "phase.league.sigma_widen", lg.sigma_widen, "a float >= 0")
    s = phase.schedule
    require(s.entropy_final is None or s.entropy_final >= 0, "phase.schedule.entropy_final", s.entropy_final,
            "null or a float >= 0")
    require(s.lr in LR_SHAPES, "phase.schedule.lr", s.lr, ", ".join(LR_SHAPES))
    require(s.kl_epochs.after >= 1, "phase.schedule.kl_epochs.after", s.kl_epochs.after, "an integer >= 1")
    require(s.kl_epochs.threshold is None or s.kl_epochs.threshold > 0, "phase.schedule.kl_epochs.threshold",
            s.kl_epochs.threshold, "null or a float > 0")
    # In process, the pool's networks are handed to the env object itself: one env worker.
    # collector=ray seats the tables of each actor's env from a plan (meeple.phases.league.remote).
    # (collector= other than auto/sync/ray is refused before this: PhaseKind.collectors)
    workers = int(cfg.env.num_workers)
    ctype = (cfg.get("collector") or {}).get("type", "auto")
    if workers != 1 and ctype != "ray":
        raise ConfigError(f"phase=league collects in this process (the env seats the pool's networks): "
                          f"env.num_workers={workers}; accepted: env.num_workers=1 with collector=sync or auto, "
                          "or collector=ray (one Ray actor per env worker)")
