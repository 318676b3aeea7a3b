"""The one learning-rate schedule of every phase: a linear warm-up, then or under a decay
(``linear``, ``cosine`` to a floor, or ``constant``), as a factor of the peak rate per step
(``torch.optim.lr_scheduler.LambdaLR``). A step is whatever the phase steps its scheduler on:
a rollout (on-policy phases) or an optimiser step (BC).
"""

from __future__ import annotations

import math
from collections.abc import Callable

DECAYS = ("linear", "cosine", "constant")


def lr_factor(total: int, decay: str, *, warmup: int = 0, start: float = 0.0, floor: float = 0.0,
              warmup_first: bool = False) -> Callable[[int], float]:
    """The factor at step ``s`` of ``total``: ``warmup`` steps rise linearly from ``start`` to
    1, and the decay takes the factor from 1 to ``floor`` by ``total``.

    ``warmup_first``: the decay starts after the warm-up, whose steps count from 1 (its last
    step is at the peak: BC's ``warmup`` fraction of its optimiser steps); otherwise the warm-up
    counts from 0 and overlays the decay, which runs from the first step (a stage's
    ``transition.warmup`` rollouts)."""
    if decay not in DECAYS:
        raise ValueError(f"learning-rate decay {decay!r}; accepted: {', '.join(DECAYS)}")
    delay = warmup if warmup_first else 0
    span = max(total - delay, 1)

    def factor(step: int) -> float:
        done = step + 1 if warmup_first else step
        warm = start + (1.0 - start) * min(done / warmup, 1.0) if warmup else 1.0
        progress = min(max(step - delay, 0) / span, 1.0)
        if progress <= 0.0 or decay == "constant":
            return warm
        if decay == "linear":
            return warm * (floor + (1.0 - floor) * (1.0 - progress))
        return warm * (floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress)))

    return factor
