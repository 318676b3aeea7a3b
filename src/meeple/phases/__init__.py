"""Phase builders: from the composed config to a LightningModule, its data and its own callbacks.

``build_run`` (cli/train.py) does what every phase shares (validation, seeds, hardware,
the callbacks bag, the Trainer arguments) and asks the builder registered under
``phase.name`` for the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import lightning as L
from omegaconf import DictConfig

from meeple.seeding import PhaseSeeds


@dataclass
class PhaseParts:
    module: L.LightningModule
    datamodule: L.LightningDataModule
    max_epochs: int  # rollouts (PPO) or iterations (AlphaZero)
    # Callbacks the phase cannot run without, placed before the configurable bag.
    callbacks: dict[str, L.Callback] = field(default_factory=dict)


PhaseBuilder = Callable[[DictConfig, Any, PhaseSeeds], PhaseParts]


def phase_builders() -> dict[str, PhaseBuilder]:
    # Imported here so that building one phase does not import the others' dependencies.
    from meeple.phases.alphazero import build_alphazero
    from meeple.phases.bc.build import build_bc  # temporary: until the phase registry
    from meeple.phases.packed_ppo import build_packed_ppo
    from meeple.phases.ppo import build_ppo

    return {"ppo": build_ppo, "packed_ppo": build_packed_ppo, "alphazero": build_alphazero, "bc": build_bc}
