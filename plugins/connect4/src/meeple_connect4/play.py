"""Connect Four in the browser against a checkpoint's network with search (entry point
``meeple.play: connect4``, ``python -m meeple.play``). The agent is the arena's ``MCTSPlayer`` on
the checkpoint's best network, greedy on the visit counts. The board is the replay's
(:func:`meeple_connect4.replay.board_state`); a move's id is its 0-based column, its label the
column 1-7, and the log is the moves as such digits (Pons' notation).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from meeple.viewer.play_session import SearchSession
from meeple_native import Connect4

from .arena import MCTSPlayer
from .replay import board_state, column_label

SIMULATIONS = 200  # per agent move: well under a second on one CPU core for the small networks


class Connect4Session(SearchSession):
    game = "connect4"

    def __init__(self, player: Any, *, human_seat: int = 0, opening: Sequence[int] = ()) -> None:
        super().__init__(player, Connect4(), human_seat=human_seat, opening=opening)

    def legal_actions(self) -> list[int]:
        return [int(c) for c in self.position.legal_moves()]

    def label(self, action: int) -> str:
        return column_label(action)

    def apply(self, action: int) -> None:
        self.position.play(action)

    def over(self) -> bool:
        return bool(self.position.is_terminal())

    def state(self) -> dict[str, Any]:
        return board_state(self.position, self.moves[-1] if self.moves else None)

    def result(self) -> dict[str, Any]:
        if not self.over():
            return {}
        winner = self.position.winner()
        text = "draw" if winner is None else f"{self.players[winner]} won (seat {winner})"
        return {"winner": None if winner is None else int(winner), "text": text}

    def log(self) -> tuple[str, str]:
        return "connect4.txt", "".join(str(m + 1) for m in self.moves) + "\n"


def session(checkpoint: str, *, seed: int, human_seat: int = 0, simulations: int | None = None) -> Connect4Session:
    """A game against ``checkpoint``'s best network searching ``simulations`` per move."""
    from meeple.export.policy import search_player  # torch: only when a checkpoint is played

    player = search_player(MCTSPlayer, checkpoint, "connect4", simulations=simulations or SIMULATIONS, seed=seed)
    return Connect4Session(player, human_seat=human_seat)
