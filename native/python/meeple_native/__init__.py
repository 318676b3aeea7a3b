"""meeple native engines (C++17, nanobind).

Connect Four rules (`Connect4`), an exact solver (`Solver`, `solve`, `analyze`,
`best_moves`), PUCT Monte Carlo tree search (`MCTS`) and batched multi-threaded
self-play (`SelfPlay`); the riichi mahjong engine is the `mahjong` submodule (used
through the meeple_mahjong plugin, docs/mahjong_engine.md); chess is ``meeple_native.chess``
(docs/chess.md). See native/README.md for the observation planes, the
score convention and the self-play thread model.
"""

from ._core import (
    HEIGHT,
    MCTS,
    NUM_PLANES,
    OBS_SHAPE,
    WIDTH,
    Connect4,
    SelfPlay,
    Solver,
    analyze,
    best_moves,
    mahjong,
    solve,
)

__all__ = [
    "HEIGHT",
    "MCTS",
    "NUM_PLANES",
    "OBS_SHAPE",
    "WIDTH",
    "Connect4",
    "SelfPlay",
    "Solver",
    "analyze",
    "best_moves",
    "mahjong",
    "solve",
]
