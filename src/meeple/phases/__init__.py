"""Learning phases: one module or package per phase kind, registered in :mod:`meeple.phases.registry`.

A Lightning phase's builder turns a stage's config into :class:`PhaseParts`;
``meeple.pipeline.lightning_stage.build_stage`` does what every phase shares (hardware, the
callbacks, the Trainer arguments).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import lightning as L


@dataclass
class PhaseParts:
    module: L.LightningModule
    datamodule: L.LightningDataModule
    max_epochs: int  # rollouts (PPO) or iterations (AlphaZero)
    # Callbacks the phase cannot run without, placed before the configurable bag.
    callbacks: dict[str, L.Callback] = field(default_factory=dict)
