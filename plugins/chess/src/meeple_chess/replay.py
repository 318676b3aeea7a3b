"""Chess games as replays for the viewer (:mod:`meeple.viewer`, docs/viewer.md): the position
(FEN) at every ply, and at each move of a searching player its top moves (UCI) with the
policy's probability and the search's visits, and its value.

``renderer`` is this plugin's ``meeple.viewers`` entry point (``viewer/renderer.js`` draws the
``state`` of :func:`board_state` as a board of Unicode pieces).
"""

from __future__ import annotations

from collections.abc import Sequence

from meeple.viewer.renderers import Renderer
from meeple.viewer.replay import Replay, Step
from meeple.viewer.search import search_decision
from meeple_chess.arena import play_game
from meeple_native.chess import Board

GAME = "chess"
RESULT_WINNER = {"1-0": 0, "0-1": 1}


def renderer() -> Renderer:
    return Renderer.from_package(GAME, __package__)


def board_state(board: Board, last: str | None = None) -> dict:
    """``fen``; ``last``: the UCI move that led here; ``check``: the side to move is in check."""
    return {"fen": board.fen(), "last": last, "check": bool(board.is_check()), "to_play": int(board.to_play)}


def record_game(players: Sequence, names: Sequence[str], title: str, *, start: Board | None = None,
                opening_moves: int = 0, opening_temperature: float = 1.0, max_plies: int | None = None,
                top: int = 5) -> Replay:
    """Plays one game (as :func:`meeple_chess.arena.play_game`) and returns its replay:
    ``names[0]`` plays white."""
    steps: list[Step] = []
    last: str | None = None

    def on_move(board: Board, player, action: int) -> None:
        nonlocal last
        move = board.action_to_uci(action)
        steps.append(Step(board_state(board, last), actor=int(board.to_play), action=move,
                          decision=search_decision(player, board.action_to_uci, top, action)))
        last = move

    final = play_game(players, start, opening_moves=opening_moves, opening_temperature=opening_temperature,
                      max_plies=max_plies, on_move=on_move)
    outcome, ending = final.result(), final.termination() or "max_plies"
    winner = RESULT_WINNER.get(outcome)
    note = f"{outcome} by {ending}" + (f": {names[winner]} wins" if winner is not None else "")
    steps.append(Step(board_state(final, last), marks=["win" if winner is not None else "draw"], note=note))
    result = {"result": outcome, "termination": ending, "plies": final.ply,
              "winner": names[winner] if winner is not None else "draw"}
    return Replay(GAME, title, list(names), steps, result=result)
