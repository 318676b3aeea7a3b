"""Players and matches on native Connect Four: network MCTS, pure MCTS, the exact solver.

A player maps a position to a column. A match alternates colours between games and
scores a win 1, a draw 0.5 and a loss 0 from the first player's side of the match
(``meeple.plugins.spec.MatchResult``); the AlphaZero gate plays its matches through
``meeple_connect4.game``.
Deterministic players would replay one game over and over, so every game opens with a
few moves sampled from the search's visit counts (``opening_temperature``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import numpy as np

from meeple.plugins.arena import NativeMCTSPlayer, NativeRandomPlayer, alternate_seats
from meeple.plugins.spec import MatchResult
from meeple_native import MCTS, Connect4, Solver


class MCTSPlayer(NativeMCTSPlayer):
    """PUCT search with a network evaluator (``TorchEvaluator``) or ``"rollout"`` / ``"uniform"``."""

    search_class = MCTS


class SolverPlayer:
    """A perfect player: one of the optimal moves (per the exact solver), picked at random."""

    def __init__(self, solver: Solver, seed: int = 0) -> None:
        self.solver = solver
        self.rng = np.random.default_rng(seed)

    def move(self, position: Connect4, temperature: float = 0.0) -> int:
        best = self.solver.best_moves(position)
        return int(best[self.rng.integers(len(best))])


class RandomPlayer(NativeRandomPlayer):
    def legal(self, position: Connect4):
        return position.legal_moves()


def play_game(players: Sequence, start: Connect4 | None = None, opening_moves: int = 0,
              opening_temperature: float = 1.0, on_move: Callable | None = None) -> Connect4:
    """Play to the end; ``players[i]`` moves when ``position.to_play == i``. Returns the final
    position. ``on_move(position, player, column)`` sees each move before it is played (a replay)."""
    position = start.copy() if start is not None else Connect4()
    first_ply = position.moves_played
    while not position.is_terminal():
        player = players[position.to_play]
        sample = position.moves_played - first_ply < opening_moves
        column = player.move(position, opening_temperature if sample else 0.0)
        if on_move is not None:
            on_move(position, player, column)
        position.play(column)
    return position


def play_match(player, opponent, games: int, *, opening_moves: int = 2, opening_temperature: float = 1.0) -> MatchResult:
    """``games`` games, ``player`` first in the even-numbered ones; results from ``player``'s side."""
    play = partial(play_game, opening_moves=opening_moves, opening_temperature=opening_temperature)
    return alternate_seats(player, opponent, games, play, lambda final: final.winner())[0]


def play_from_positions(player, opponent, starts: Sequence[Connect4],
                        values: Sequence[int]) -> tuple[MatchResult, int]:
    """``player`` moves first from each start, whose game-theoretic value for the side to move
    is ``values[i]`` (> 0 win, 0 draw, < 0 loss: e.g. the benchmark's solver scores). Returns the
    results and how many games ended with at least that value (``kept``)."""
    wins = draws = losses = 0
    kept = 0
    for start, value in zip(starts, values, strict=True):
        final = play_game((player, opponent) if start.to_play == 0 else (opponent, player), start=start)
        winner = final.winner()
        outcome = 0 if winner is None else (1 if winner == start.to_play else -1)
        wins, draws, losses = wins + (outcome == 1), draws + (outcome == 0), losses + (outcome == -1)
        kept += outcome >= np.sign(value)
    return MatchResult(wins, draws, losses), kept
