"""Chess in the browser against a checkpoint's network with search (entry point
``meeple.play: chess``, ``python -m meeple.play``). The agent is the arena's ``MCTSPlayer`` on the
checkpoint's best network, greedy on the visit counts. Moves travel and show as UCI (``e2e4``,
``e7e8q``: the ids the renderer's board input submits, the labels of the replays); the log is
PGN, in SAN (:mod:`meeple_chess.notation`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from meeple.viewer.play_session import SearchSession
from meeple_native.chess import Board

from .arena import MCTSPlayer
from .notation import pgn, san
from .replay import RESULT_WINNER, board_state

SIMULATIONS = 100  # per agent move: about a second on one CPU core for the small networks


class ChessSession(SearchSession):
    game = "chess"

    def __init__(self, player: Any, *, human_seat: int = 0, opening: Sequence[int] = ()) -> None:
        self.san: list[str] = []  # the moves for the PGN
        self.uci: list[str] = []  # and as the board shows the last one
        super().__init__(player, Board(), human_seat=human_seat, opening=opening)

    def legal_actions(self) -> list[int]:
        return [int(a) for a in self.position.legal_actions()]

    def label(self, action: int) -> str:
        return self.position.action_to_uci(action)

    def action_id(self, action: int) -> str:
        return self.position.action_to_uci(action)

    def apply(self, action: int) -> None:
        self.san.append(san(self.position, action))
        self.uci.append(self.position.action_to_uci(action))
        self.position.push_action(action)

    def over(self) -> bool:
        return bool(self.position.is_game_over())

    def state(self) -> dict[str, Any]:
        return board_state(self.position, self.uci[-1] if self.uci else None)

    def result(self) -> dict[str, Any]:
        if not self.over():
            return {}
        outcome, ending = self.position.result(), self.position.termination()
        winner = RESULT_WINNER.get(outcome)
        who = "draw" if winner is None else f"{self.players[winner]} won ({'white' if winner == 0 else 'black'})"
        return {"result": outcome, "termination": ending, "text": f"{outcome} by {ending}: {who}"}

    def log(self) -> tuple[str, str]:
        headers = {"Event": "meeple play", "Site": "127.0.0.1", "White": self.players[0], "Black": self.players[1]}
        return "chess.pgn", pgn(self.san, self.position.result(), headers)


def session(checkpoint: str, *, seed: int, human_seat: int = 0, simulations: int | None = None) -> ChessSession:
    """A game against ``checkpoint``'s best network searching ``simulations`` per move."""
    from meeple.export.policy import search_player  # torch: only when a checkpoint is played

    player = search_player(MCTSPlayer, checkpoint, "chess", simulations=simulations or SIMULATIONS, seed=seed)
    return ChessSession(player, human_seat=human_seat)
