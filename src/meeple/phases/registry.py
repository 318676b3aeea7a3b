"""One record per learning-phase kind: validation, building and running all read it.

A *phase kind* is a learning algorithm (``ppo``, ``bc``, ``alphazero`` ...); a *stage* is one
position in an experiment's pipeline that runs a phase kind (``docs/architecture.md``). Adding a
kind is one package under ``meeple/phases/`` plus one line here.

Builders and runners are named as ``"module:function"`` and imported only when a stage of that
kind runs, so validating a config never imports a phase's heavy dependencies.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from meeple.errors import ConfigError


@dataclass(frozen=True)
class PhaseKind:
    """``schema``: the typed ``phase`` node; ``check(cfg, phase)``: cross-field rules (ConfigError).

    Exactly one of ``build`` (a Lightning phase: ``build(cfg, typed, seeds) -> PhaseParts``) and
    ``run`` (a process-based phase: ``run(stage, context) -> dict[str, float]``) is set.
    """

    name: str
    schema: type
    check: Callable[[Any, Any], None]
    build: str | None = None
    run: str | None = None

    def __post_init__(self) -> None:
        if (self.build is None) == (self.run is None):
            raise TypeError(f"phase kind {self.name!r}: set exactly one of build= and run=")

    @property
    def is_lightning(self) -> bool:
        return self.build is not None

    def builder(self) -> Callable[..., Any]:
        return _resolve(self.build)

    def runner(self) -> Callable[..., Any]:
        return _resolve(self.run)


def _resolve(path: str) -> Callable[..., Any]:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def _kinds() -> dict[str, PhaseKind]:
    from meeple.config import schema as s
    from meeple.phases.bc.schema import BCPhase, check_bc

    kinds = [
        PhaseKind("ppo", s.PPOPhase, s.check_ppo, build="meeple.phases.ppo:build_ppo"),
        PhaseKind("packed_ppo", s.PackedPPOPhase, s.check_ppo, build="meeple.phases.packed_ppo:build_packed_ppo"),
        PhaseKind("alphazero", s.AlphaZeroPhase, s.check_alphazero, build="meeple.phases.alphazero:build_alphazero"),
        PhaseKind("bc", BCPhase, check_bc, build="meeple.phases.bc.build:build_bc"),
        PhaseKind("dqn", s.DQNPhase, s.check_dqn, run="meeple.multiagent.run:run_dqn_stage"),
    ]
    return {kind.name: kind for kind in kinds}


def phase_kind(name: Any) -> PhaseKind:
    """The record of ``phase.name``; an unknown name lists the accepted ones."""
    kinds = _kinds()
    if name not in kinds:
        raise ConfigError(f"phase.name={name!r} is not a phase kind; accepted: {', '.join(kinds)}")
    return kinds[name]


def phase_kinds() -> list[str]:
    return list(_kinds())
