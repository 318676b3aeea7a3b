"""The skeleton of a game's strength benchmark for the AlphaZero phase (a ``phase.callbacks``
entry): when to measure, on which rank, with which seeds, and how the numbers are kept and logged.

A game's plugin subclasses :class:`IterationBenchmark` with what it measures (``evaluate_module``),
if it needs them, positions prepared once (``prepare``), and the games it shows (``replay_games``:
``replays`` of them after each measurement, saved as pages by :mod:`meeple.viewer.artifacts`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import lightning as L
import torch

from meeple.callbacks.ranks import log_shared, on_rank_zero
from meeple.errors import ConfigError
from meeple.seeding import Component
from meeple.viewer.artifacts import publish_replays
from meeple.viewer.replay import Replay

log = logging.getLogger(__name__)


def module_device(module: L.LightningModule) -> torch.device:
    return next(module.net.parameters()).device


def alternating_replays(record: Callable[[tuple, tuple[str, str], str], Replay], agent: Any, opponent: Any,
                        opponent_name: str, count: int, title: str) -> list[Replay]:
    """``count`` games of ``agent`` against ``opponent``, the agent first in the even-numbered
    ones, each played and recorded by ``record(seats, names, title)`` (a game's ``record_game``)."""
    replays = []
    for game in range(count):
        seats, names = ((agent, opponent), ("agent", opponent_name)) if game % 2 == 0 else \
            ((opponent, agent), (opponent_name, "agent"))
        replays.append(record(seats, names, f"{title} game {game + 1}: {names[0]} vs {names[1]}"))
    return replays


class IterationBenchmark(L.Callback):
    """Every ``every_n_iterations`` iterations (and after the last) measures the best network on
    rank 0 and logs the metrics on every rank; ``history`` keeps each measurement with its
    iteration. The phase puts its gate first, so this measures the network that plays self-play.
    After each measurement rank 0 also plays ``replays`` games for the viewer (0: none)."""

    log_label: ClassVar[str] = "benchmark"  # the log line's prefix

    def __init__(self, every_n_iterations: int, replays: int = 0) -> None:
        if replays < 0:
            raise ConfigError(f"{type(self).__name__} replays={replays}; accepted: an integer >= 0 (0: no replays)")
        self.every_n_iterations = every_n_iterations
        self.replays = replays
        self.history: list[dict[str, float]] = []
        self._datamodule = None  # its seed streams are checkpointed (exact resume)

    def prepare(self) -> None:
        """Builds what every measurement reuses (positions, solvers), once, before the first."""

    def evaluate_module(self, pl_module: L.LightningModule) -> dict[str, float]:
        raise NotImplementedError(f"{type(self).__name__} must define evaluate_module(pl_module)")

    def replay_games(self, pl_module: L.LightningModule, count: int, iteration: int) -> list[Replay]:
        """``count`` games of the network just measured, as replays (called after
        ``evaluate_module``, on rank 0). A game without a viewer keeps this default: none."""
        return []

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if self._datamodule is not None:
            return
        self._datamodule = trainer.datamodule
        self.prepare()

    @property
    def _seeds(self) -> Iterator[int]:
        return self._datamodule.seed_stream(Component.EVALUATION)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        iteration = trainer.current_epoch + 1
        last = trainer.max_epochs is not None and iteration >= trainer.max_epochs
        if iteration % self.every_n_iterations and not last:
            return
        metrics = on_rank_zero(trainer, lambda: self.evaluate_module(pl_module))  # once, for every learner process
        metrics["iteration"] = float(iteration)
        self.history.append(metrics)
        log_shared(pl_module, {k: v for k, v in metrics.items() if k != "iteration"})
        if self.replays and trainer.global_rank == 0:
            self._save_replays(trainer, pl_module, iteration)

    def _save_replays(self, trainer: L.Trainer, pl_module: L.LightningModule, iteration: int) -> None:
        try:
            replays = self.replay_games(pl_module, self.replays, iteration)
        except Exception as err:  # a replay is a view of the run: it must never fail it
            log.warning("%s: replays of iteration %d skipped: %s", self.log_label, iteration, err)
            return
        publish_replays(trainer, replays)

    def finish(self, metrics: dict[str, float], start: float) -> dict[str, float]:
        """Adds ``perf/eval_s`` (seconds since ``start``) and logs the ``eval/`` metrics."""
        metrics["perf/eval_s"] = time.perf_counter() - start
        logging.getLogger(type(self).__module__).info(
            "%s: %s", self.log_label,
            ", ".join(f"{k.removeprefix('eval/')}={v:.3f}" for k, v in metrics.items() if k.startswith("eval/")))
        return metrics
