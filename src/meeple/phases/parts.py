"""What a Lightning phase's builder returns."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import lightning as L


@dataclass
class PhaseParts:
    module: L.LightningModule
    datamodule: L.LightningDataModule
    max_epochs: int  # rollouts (PPO) or iterations (AlphaZero)
    # Callbacks the phase cannot run without, placed before the configurable bag.
    callbacks: dict[str, L.Callback] = field(default_factory=dict)
    # Trainer arguments the phase sets (e.g. BC's val_check_interval), over the stage's defaults.
    trainer: dict[str, Any] = field(default_factory=dict)
    # After the fit of several learner processes: what each one drew (seeds, a fingerprint of its
    # first rollout), recorded in the run directory; None: the phase records nothing per process.
    ranks: Callable[[], list[dict] | None] | None = None
