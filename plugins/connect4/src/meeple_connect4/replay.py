"""Connect Four games as replays for the viewer (:mod:`meeple.viewer`, docs/viewer.md): the board
at every ply, and at each move of a searching player its top columns with the policy's
probability and the search's visits, and its value. Columns are labelled 1..7 (Pons' notation).

``renderer`` is this plugin's ``meeple.viewers`` entry point (``viewer/renderer.js`` draws the
``state`` of :func:`board_state`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from meeple.viewer.renderers import Renderer
from meeple.viewer.replay import Replay, Step
from meeple.viewer.search import search_decision
from meeple_connect4.arena import play_game
from meeple_native import OBS_SHAPE, WIDTH, Connect4

GAME = "connect4"


def renderer() -> Renderer:
    return Renderer.from_package(GAME, __package__)


def column_label(column: int) -> str:
    return str(column + 1)


def board_state(position: Connect4, last: int | None = None) -> dict:
    """``cells``: 6 rows (top first) of 7 ints, 1 the first player's stone, 2 the second's, 0
    empty; ``to_play`` (0 or 1); ``last``: the column (0-based) of the stone just played."""
    planes = np.zeros(OBS_SHAPE, np.float32)
    position.encode(planes)  # the side to move's view: its own stones first
    mover, other = position.to_play + 1, 2 - position.to_play
    cells = np.where(planes[0] > 0, mover, np.where(planes[1] > 0, other, 0))
    return {"cells": cells.tolist(), "to_play": int(position.to_play), "last": last}


def record_game(players: Sequence, names: Sequence[str], title: str, *, start: Connect4 | None = None,
                opening_moves: int = 0, opening_temperature: float = 1.0, top: int = WIDTH) -> Replay:
    """Plays one game (as :func:`meeple_connect4.arena.play_game`) and returns its replay:
    ``names[i]`` is ``players[i]``, the first player when the game starts from the empty board."""
    steps: list[Step] = []
    last: int | None = None

    def on_move(position: Connect4, player, column: int) -> None:
        nonlocal last
        steps.append(Step(board_state(position, last), actor=int(position.to_play), action=column_label(column),
                          decision=search_decision(player, column_label, top, column)))
        last = column

    final = play_game(players, start, opening_moves, opening_temperature, on_move=on_move)
    winner = final.winner()
    steps.append(Step(board_state(final, last), marks=["win" if winner is not None else "draw"],
                      note=f"{names[winner]} wins" if winner is not None else "draw: the board is full"))
    result = {"winner": names[winner] if winner is not None else "draw", "moves": final.moves_played}
    return Replay(GAME, title, list(names), steps, result=result)
