"""Players and match bookkeeping shared by the arenas of games whose search is a ``meeple_native``
``MCTS`` class (each game's plugin binds the class and its own state's moves).

Torch-free: config validation loads the game modules that import these.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar

import numpy as np

from meeple.plugins.spec import MatchResult

Final = TypeVar("Final")


class NativeMCTSPlayer:
    """PUCT search (``search``, a native ``MCTS`` class) with a network evaluator
    (``TorchEvaluator``) or ``"rollout"`` / ``"uniform"``; no exploration noise. ``last_search``
    is the native search's report of the last move (visits, prior, root_value: what a replay shows)."""

    search_class: ClassVar[type]

    def __init__(self, evaluator: Callable | str, *, num_simulations: int, leaves_in_flight: int = 8,
                 c_puct: float = 1.5, seed: int = 0) -> None:
        self.evaluator = evaluator
        self.search = self.search_class(num_simulations=num_simulations, c_puct=c_puct,
                                        leaves_in_flight=leaves_in_flight, seed=seed, dirichlet_epsilon=0.0)
        self.last_search: dict[str, Any] | None = None

    def move(self, state: Any, temperature: float = 0.0) -> int:
        self.last_search = self.search.search(state, self.evaluator)
        return self.search.choose_action(temperature)


class NativeRandomPlayer:
    """A uniformly random legal move; the subclass names the state's legal moves (``legal``)."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def legal(self, state: Any) -> Sequence[int]:
        raise NotImplementedError(f"{type(self).__name__} must define legal(state)")

    def move(self, state: Any, temperature: float = 0.0) -> int:
        legal = self.legal(state)
        return int(legal[self.rng.integers(len(legal))])


def alternate_seats(player: Any, opponent: Any, games: int, play: Callable[[tuple[Any, Any]], Final],
                    winner: Callable[[Final], int | None]) -> tuple[MatchResult, list[Final]]:
    """``games`` games through ``play(seats)``, ``player`` in seat 0 of the even-numbered ones;
    ``winner(final)`` is the winning seat or None for a draw. Returns the result from
    ``player``'s side and each game's final state."""
    wins = draws = losses = 0
    finals = []
    for g in range(games):
        seat = g % 2
        final = play((player, opponent) if seat == 0 else (opponent, player))
        who = winner(final)
        if who is None:
            draws += 1
        elif who == seat:
            wins += 1
        else:
            losses += 1
        finals.append(final)
    return MatchResult(wins, draws, losses), finals
