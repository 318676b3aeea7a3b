"""Connect Four for the AlphaZero phase (entry point ``meeple.games: connect4``).

Rules, search and self-play are ``meeple_native``'s; the gate's matches are
:mod:`meeple_connect4.arena`'s. Config validation loads this module, so it imports no torch.
"""

from __future__ import annotations

from typing import Any

from meeple.plugins.native_game import NativeSelfPlayGame
from meeple.plugins.spec import MatchResult
from meeple_native import OBS_SHAPE, WIDTH, SelfPlay

from .arena import MCTSPlayer, play_match


class Connect4Game(NativeSelfPlayGame):
    engine = SelfPlay
    player = MCTSPlayer
    name = "connect4"
    planes_shape: tuple[int, ...] = tuple(OBS_SHAPE)
    num_actions: int = WIDTH
    mirror_symmetric = True  # a column's mirror is a column: phase.augment_mirror is valid

    def play_match(self, player: Any, opponent: Any, games: int, *,
                   opening_moves: int) -> MatchResult:
        return play_match(player, opponent, games, opening_moves=opening_moves)


game = Connect4Game()
