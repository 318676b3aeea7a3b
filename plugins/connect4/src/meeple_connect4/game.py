"""Connect Four for the AlphaZero phase (entry point ``meeple.games: connect4``).

Rules, search and self-play are ``meeple_native``'s; the gate's matches are
:mod:`meeple_connect4.arena`'s. Config validation loads this module, so it imports no torch.
"""

from __future__ import annotations

from typing import Any

from meeple.plugins.spec import MatchResult
from meeple_native import OBS_SHAPE, WIDTH, SelfPlay


def _selfplay_options() -> frozenset[str]:
    """Keyword options of ``meeple_native.SelfPlay`` that a config may set (from its signature)."""
    first = (SelfPlay.__init__.__doc__ or "").split("\n", 1)[0]  # nanobind: "__init__(self, evaluator, *, a: int = 1, ...)"
    names = {part.split(":")[0].strip() for part in first[first.index("*,") + 2 : first.rindex(")")].split(",")}
    return frozenset(names - {"seed", "planes_buffers"})  # set by the phase's data module


class Connect4Game:
    name = "connect4"
    planes_shape: tuple[int, ...] = tuple(OBS_SHAPE)
    num_actions: int = WIDTH
    selfplay_options = _selfplay_options()
    mirror_symmetric = True  # a column's mirror is a column: phase.augment_mirror is valid

    def selfplay_engine(self, evaluator: Any, *, seed: int, planes_buffers: Any,
                        **options: Any) -> SelfPlay:
        return SelfPlay(evaluator, seed=seed, planes_buffers=planes_buffers, **options)

    def mcts_player(self, evaluator: Any, *, num_simulations: int, leaves_in_flight: int,
                    seed: int):
        from meeple_connect4.arena import MCTSPlayer

        return MCTSPlayer(evaluator, num_simulations=num_simulations,
                          leaves_in_flight=leaves_in_flight, seed=seed)  # fmt: skip

    def play_match(self, player: Any, opponent: Any, games: int, *,
                   opening_moves: int) -> MatchResult:
        from meeple_connect4.arena import play_match

        return play_match(player, opponent, games, opening_moves=opening_moves)


game = Connect4Game()
