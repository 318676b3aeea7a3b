"""meeple native engines (C++17, nanobind).

Connect Four rules (`Connect4`) and an exact solver (`Solver`, `solve`, `analyze`,
`best_moves`). See native/README.md for the observation planes and the score
convention.
"""

from ._core import (
    HEIGHT,
    NUM_PLANES,
    OBS_SHAPE,
    WIDTH,
    Connect4,
    Solver,
    analyze,
    best_moves,
    solve,
)

__all__ = [
    "HEIGHT",
    "NUM_PLANES",
    "OBS_SHAPE",
    "WIDTH",
    "Connect4",
    "Solver",
    "analyze",
    "best_moves",
    "solve",
]
