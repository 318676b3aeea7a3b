"""1v3 duplicate evaluation of the training policy as a Lightning callback.

Any stage whose module has a mahjong ``policy`` (a TorchRL actor over the 84 x 34 planes and
the 155-action mask) can add it to its phase's ``callbacks``: before the first step it measures
the untrained network once (``eval/untrained_*``, the baseline a learning claim is read
against); then it plays ``games`` game indices x 4 rotations of the greedy policy against
three copies of ``opponent`` on the native batch simulator (meeple_mahjong.policy.PolicyTable,
meeple_mahjong.duplicate), either at every ``every_n_validations``-th validation (BC: the
checkpoint a validation saves, and so the stage's gate file, then records the evaluation of
those very weights) or every ``every_n_epochs`` epochs and after the last one (PPO), and logs:

- ``eval/avg_rank`` (1 = always first, 2.5 = as good as the opponents) with its 95% interval
  ``eval/avg_rank_ci_low`` / ``eval/avg_rank_ci_high`` over game indices (the four rotations of
  one index share walls, so the index is the independent sample);
- ``eval/rank_points`` (mean of 90 / 45 / 0 / -135 by placement), ``eval/first_rate``;
- per hand: ``eval/win_rate``, ``eval/deal_in_rate``, ``eval/riichi_rate``, ``eval/call_rate``.

The metrics are logged before the checkpoint callback runs, so the checkpoint (and a stage's
gate file) records them: a transition gate can require e.g. ``eval/avg_rank <= 2.55``.
Walls and bot streams come from ``seed`` and the game indices, the same at every evaluation,
so successive numbers differ only by the policy.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import lightning as L
import torch

from meeple.callbacks.evaluation import evaluation_due

from .duplicate import BOT_NAMES, DuplicateStats, check_bot, run_duplicate
from .policy import POLICY, PolicyTable, greedy_policy

log = logging.getLogger(__name__)

RANK_POINTS = (90.0, 45.0, 0.0, -135.0)
PREFIX = "eval/"
UNTRAINED = "eval/untrained_"


def duplicate_metrics(stats: DuplicateStats) -> dict[str, float]:
    """The logged numbers of one duplicate evaluation (keys without the ``eval/`` prefix)."""
    summary = stats.summary()
    ch = summary["challenger"]
    low, high = ch["avg_rank_ci95"] or (float("nan"), float("nan"))
    return {
        "avg_rank": ch["avg_rank"],
        "avg_rank_ci_low": low,
        "avg_rank_ci_high": high,
        "rank_points": sum(p * r for p, r in zip(RANK_POINTS, ch["rank_rates"], strict=True)),
        "first_rate": ch["first_rate"],
        "win_rate": ch["win_rate"],
        "deal_in_rate": ch["deal_in_rate"],
        "riichi_rate": ch["riichi_rate"],
        "call_rate": ch["call_rate"],
        "games": float(summary["game_indices"]),
    }


class DuplicateEvaluation(L.Callback):
    """Duplicate evaluation of ``pl_module.policy`` against three ``opponent`` bots."""

    def __init__(self, *, games: int, opponent: str = "rule", seed: int = 0, every_n_epochs: int = 1,
                 every_n_validations: int | None = None, first_game: int = 0, chunk: int = 32,
                 threads: int = 1, baseline: bool = True, rules: dict[str, Any] | None = None) -> None:
        if games < 1:
            raise ValueError(f"duplicate evaluation games={games}; accepted: an integer >= 1")
        if every_n_epochs < 1:
            raise ValueError(f"duplicate evaluation every_n_epochs={every_n_epochs}; accepted: an integer >= 1")
        if every_n_validations is not None and every_n_validations < 1:
            raise ValueError(f"duplicate evaluation every_n_validations={every_n_validations}; accepted: "
                             "null (evaluate at epoch ends) or an integer >= 1")
        self.every_n_validations = every_n_validations
        self.validations = 0
        self.opponent = check_bot(opponent, "duplicate evaluation opponent")
        self.games, self.seed, self.first_game = games, seed, first_game
        self.every_n_epochs, self.chunk, self.threads = every_n_epochs, chunk, threads
        self.baseline = baseline
        self.rules = dict(rules or {})
        self.history: list[dict[str, float]] = []  # every evaluation's metrics, with its global step
        self.untrained: dict[str, float] | None = None  # the baseline measured before the first step

    def evaluate(self, pl_module: L.LightningModule) -> dict[str, float]:
        """One duplicate evaluation of the module's current greedy policy."""
        policy = pl_module.policy
        was_training = policy.training
        started = time.perf_counter()
        try:
            table = PolicyTable(greedy_policy(policy), threads=self.threads, **self.rules)
            with torch.no_grad():
                stats = run_duplicate(table, POLICY, self.opponent, self.games, self.seed,
                                      first_game=self.first_game, chunk=self.chunk)
        finally:
            policy.train(was_training)
        metrics = duplicate_metrics(stats)
        log.info("duplicate vs 3x %s, %d game indices: avg rank %.3f [%.3f, %.3f] (%.1f s)", self.opponent,
                 self.games, metrics["avg_rank"], metrics["avg_rank_ci_low"], metrics["avg_rank_ci_high"],
                 time.perf_counter() - started)
        return metrics

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.baseline and trainer.global_step == 0 and not self.history:
            metrics = self.evaluate(pl_module)
            self.history.append({"step": 0.0, "untrained": 1.0, **metrics})
            for logger in trainer.loggers:  # outside an epoch: straight to the loggers
                logger.log_metrics({UNTRAINED + k: v for k, v in metrics.items()}, step=0)
            self.untrained = metrics

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.every_n_validations is None or trainer.sanity_checking:
            return
        self.validations += 1
        if self.validations % self.every_n_validations == 0:
            self._evaluate_and_log(trainer, pl_module)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.every_n_validations is None and (evaluation_due(trainer, self.every_n_epochs) or trainer.should_stop):
            self._evaluate_and_log(trainer, pl_module)

    def _evaluate_and_log(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        metrics = self.evaluate(pl_module)
        self.history.append({"step": float(trainer.global_step), **metrics})
        for key, value in metrics.items():
            pl_module.log(PREFIX + key, value, on_step=False, on_epoch=True, prog_bar=key == "avg_rank")
        if self.untrained is not None:
            # Recorded with each evaluation so the gate file says what training started from.
            for key in ("avg_rank", "rank_points"):
                pl_module.log(UNTRAINED + key, self.untrained[key], on_step=False, on_epoch=True)

    def state_dict(self) -> dict[str, Any]:
        return {"history": list(self.history), "untrained": self.untrained, "validations": self.validations}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.history = list(state["history"])
        self.untrained = state.get("untrained")
        self.validations = int(state.get("validations", 0))


__all__ = ["BOT_NAMES", "RANK_POINTS", "DuplicateEvaluation", "duplicate_metrics"]
