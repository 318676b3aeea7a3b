"""What a Lightning phase's builder returns."""

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
