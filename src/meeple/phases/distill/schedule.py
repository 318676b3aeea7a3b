"""Where a distillation stage is in its oracle stages (``phase.distill.schedule``).

An oracle stage ends after ``advance.max_rollouts`` rollouts, or earlier on a plateau of
``advance.metric`` (no improvement by more than ``min_delta`` for ``patience`` rollouts), but never
before ``advance.min_rollouts``: a noisy metric that plateaus early would otherwise cut the stages
with the most oracle input shortest. After the last stage comes the *final stretch*.

Pure bookkeeping, no torch: :class:`DistillModule` acts on what :meth:`OracleClock.after_rollout`
returns and saves :meth:`OracleClock.state_dict` in its checkpoints.
"""

from __future__ import annotations

import math
from typing import Any

from meeple.phases.distill.schema import Distill, OracleStage


class OracleClock:
    def __init__(self, distill: Distill) -> None:
        self.distill = distill
        self.stage = 0  # 0-based; len(schedule) once final
        self.stage_rollouts = 0
        self.best: float | None = None
        self.stale = 0

    @property
    def final(self) -> bool:
        """In the final stretch: past the last oracle stage."""
        return self.stage >= len(self.distill.schedule)

    def current(self) -> OracleStage:
        return self.distill.schedule[min(self.stage, len(self.distill.schedule) - 1)]

    def keep_probabilities(self) -> dict[str, float]:
        keep = {name: 1.0 for name in self.distill.groups}
        keep.update(self.current().keep)
        return keep

    def kl_coef(self) -> float:
        return self.current().kl_coef

    def after_rollout(self, metrics: dict[str, float]) -> bool:
        """Count a finished rollout; True exactly when it starts the final stretch."""
        if self.final:
            return False
        self.stage_rollouts += 1
        rule = self.distill.advance
        value = metrics.get(rule.metric) if rule.metric else None
        if value is not None and math.isfinite(value):
            sign = 1.0 if rule.mode == "min" else -1.0
            if self.best is None or sign * (self.best - value) > rule.min_delta:
                self.best, self.stale = value, 0
            else:
                self.stale += 1
        plateau = self.stale >= rule.patience and self.stage_rollouts >= rule.min_rollouts
        if self.stage_rollouts < rule.max_rollouts and not plateau:
            return False
        self.stage, self.stage_rollouts, self.best, self.stale = self.stage + 1, 0, None, 0
        return self.final

    # -- checkpoint (the keys earlier checkpoints have; `final` is written for them, derived on load) --
    def state_dict(self) -> dict[str, Any]:
        return dict(stage=self.stage, stage_rollouts=self.stage_rollouts, best=self.best, stale=self.stale,
                    final=self.final)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.stage, self.stage_rollouts = int(state["stage"]), int(state["stage_rollouts"])
        self.best, self.stale = state["best"], int(state["stale"])
