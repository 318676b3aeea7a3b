"""AlphaZero's gate: at each iteration's end the candidate plays the best network.

The phase builder puts it before the configured callbacks (``phase.callbacks``, e.g. a game's
strength benchmark), so those measure the best network after this iteration's gate.
"""

from __future__ import annotations

import logging
import time

import lightning as L

from meeple.callbacks.ranks import log_shared, on_rank_zero
from meeple.phases.alphazero.benchmark import module_device
from meeple.phases.alphazero.evaluator import TorchEvaluator
from meeple.plugins.spec import AlphaZeroGame
from meeple.seeding import Component
from meeple.tracking import keys

log = logging.getLogger(__name__)


class AlphaZeroGate(L.Callback):
    """The candidate plays ``games`` games against the best network (colours alternate,
    ``opening_moves`` sampled plies per game) of ``game``, both searching with
    ``num_simulations``; it replaces the best one if it scores at least ``threshold``
    (win 1, draw 0.5). ``games=0`` accepts every candidate."""

    def __init__(self, game: AlphaZeroGame, games: int, threshold: float, num_simulations: int,
                 opening_moves: int, leaves_in_flight: int = 8) -> None:
        self.game = game
        self.games = games
        self.threshold = threshold
        self.num_simulations = num_simulations
        self.opening_moves = opening_moves
        self.leaves_in_flight = leaves_in_flight
        self.last_score: float | None = None

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.games == 0:
            score, accepted, seconds = 1.0, True, 0.0
        else:  # several learners: rank 0 plays the match, every rank promotes (or not) alike
            score, seconds = on_rank_zero(trainer, lambda: self._match(trainer, pl_module))
            accepted = score >= self.threshold
        if accepted:
            pl_module.promote()
        self.last_score = score
        if self.games == 0:
            log.info("gate: off (gate.games=0): candidate accepted as generation %d", pl_module.generation)
        else:
            log.info("gate: candidate scored %.2f against generation %d (threshold %.2f): %s", score,
                     pl_module.generation - accepted, self.threshold, "accepted" if accepted else "rejected")
        log_shared(pl_module, {keys.GATE_SCORE: score, keys.GATE_ACCEPTED: float(accepted),
                               keys.GATE_GENERATION: float(pl_module.generation), "perf/gate_s": seconds})

    def _match(self, trainer: L.Trainer, pl_module: L.LightningModule) -> tuple[float, float]:
        """The candidate's score against the best network, and the seconds the match took."""
        start = time.perf_counter()
        device = module_device(pl_module)
        # the datamodule's stream: its position is in the checkpoint (exact resume)
        seeds = trainer.datamodule.seed_stream(Component.OPPONENT)
        candidate = self._player(TorchEvaluator(pl_module.net, device), next(seeds))
        best = self._player(TorchEvaluator(pl_module.best, device), next(seeds))
        result = self.game.play_match(candidate, best, self.games, opening_moves=self.opening_moves)
        return result.score, time.perf_counter() - start

    def _player(self, evaluator: TorchEvaluator, seed: int):
        return self.game.mcts_player(evaluator, num_simulations=self.num_simulations,
                                     leaves_in_flight=self.leaves_in_flight, seed=seed)
