"""Chess for the AlphaZero phase (entry point ``meeple.games: chess``).

Rules, search and self-play are ``meeple_native.chess``'s (docs/chess.md: planes, the 4,672-move
policy, game end by checkmate, stalemate, the 50-move rule, threefold repetition and insufficient
material, all automatic, so every game is finite without a ply cap); the gate's matches are
:mod:`meeple_chess.arena`'s. Config validation loads this module, so it imports no torch.
"""

from __future__ import annotations

from typing import Any

from meeple.plugins.native_game import NativeSelfPlayGame
from meeple.plugins.spec import MatchResult
from meeple_native.chess import NUM_ACTIONS, PLANES_SHAPE, SelfPlay

from .arena import MCTSPlayer, play_match


class ChessGame(NativeSelfPlayGame):
    engine = SelfPlay
    player = MCTSPlayer
    name = "chess"
    planes_shape: tuple[int, ...] = tuple(PLANES_SHAPE)
    num_actions: int = NUM_ACTIONS
    # Castling rights differ between the king's and the queen's side: a left-right mirror of a
    # position is not a chess position with the same value, so `phase.augment_mirror` is refused.
    mirror_symmetric = False

    def play_match(self, player: Any, opponent: Any, games: int, *,
                   opening_moves: int) -> MatchResult:
        return play_match(player, opponent, games, opening_moves=opening_moves).result


game = ChessGame()
