"""Players and matches on native chess: MCTS with a network, pure MCTS (random playouts), random.

A player maps a ``meeple_native.chess.Board`` to a policy index (``Board.push_action``). A match
alternates colours between games and scores a win 1, a draw 0.5 and a loss 0 from the first
player's side (``meeple.plugins.spec.MatchResult``). Games end by the engine's own rules
(checkmate, stalemate, insufficient material, the 50-move rule, threefold repetition; the last
two at once, as in self-play), so every game is finite; ``max_plies`` optionally adjudicates a
longer game as a draw (off by default; the AlphaZero phase never sets it).
Deterministic players would replay one game, so the first ``opening_moves`` plies of each game
are sampled from the search's visit counts (``opening_temperature``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from meeple.plugins.arena import NativeMCTSPlayer, NativeRandomPlayer, alternate_seats
from meeple.plugins.spec import MatchResult
from meeple_native.chess import MCTS, Board


class MCTSPlayer(NativeMCTSPlayer):
    """PUCT search with a network evaluator (``TorchEvaluator``) or ``"rollout"`` / ``"uniform"``
    (no exploration noise)."""

    search_class = MCTS


class RandomPlayer(NativeRandomPlayer):
    """A uniformly random legal move."""

    def legal(self, board: Board):
        return board.legal_actions()


@dataclass
class MatchReport:
    """A match's result from the first player's side, with each game's length and ending."""

    result: MatchResult
    plies: list[int] = field(default_factory=list)
    terminations: Counter = field(default_factory=Counter)  # 'checkmate', ..., 'max_plies'


def play_game(players: Sequence, start: Board | None = None, *, opening_moves: int = 0,
              opening_temperature: float = 1.0, max_plies: int | None = None,
              on_move: Callable | None = None) -> Board:
    """Play to the end (or ``max_plies`` plies); ``players[i]`` moves when ``board.to_play == i``
    (0 white). Returns the final board. ``on_move(board, player, action)`` sees each move before
    it is played (a replay)."""
    board = start.copy() if start is not None else Board()
    first_ply = board.ply
    while not board.is_game_over():
        played = board.ply - first_ply
        if max_plies is not None and played >= max_plies:
            break
        temperature = opening_temperature if played < opening_moves else 0.0
        player = players[board.to_play]
        action = player.move(board, temperature)
        if on_move is not None:
            on_move(board, player, action)
        board.push_action(action)
    return board


def winner(board: Board) -> int | None:
    """0 white, 1 black, None for a draw or an unfinished (adjudicated) game."""
    return {"1-0": 0, "0-1": 1}.get(board.result())


def play_match(player, opponent, games: int, *, opening_moves: int = 4, opening_temperature: float = 1.0,
               max_plies: int | None = None) -> MatchReport:
    """``games`` games, ``player`` white in the even-numbered ones; results from ``player``'s side."""
    play = partial(play_game, opening_moves=opening_moves, opening_temperature=opening_temperature,
                   max_plies=max_plies)
    result, finals = alternate_seats(player, opponent, games, play, winner)
    return MatchReport(result, [final.ply for final in finals],
                       Counter(final.termination() or "max_plies" for final in finals))
