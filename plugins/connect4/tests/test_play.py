"""The Connect Four play session without a browser (tests/browser/test_connect4.py drives the page):
the agent's decision as the page shows it, openings, seats."""

from __future__ import annotations

import numpy as np
import pytest

from meeple.errors import ConfigError
from meeple.viewer.play_session import IllegalMove, PlaySession
from meeple_connect4.play import Connect4Session


class TiedSearch:
    """A player whose search ties six columns and plays the seventh (what greedy tie-breaking
    can do): the page must still list the move played."""

    def __init__(self) -> None:
        self.last_search = None

    def move(self, position, temperature: float = 0.0) -> int:
        self.last_search = {"visits": np.array([5, 5, 5, 5, 5, 5, 5]), "prior": np.full(7, 1 / 7), "root_value": 0.25}
        return 6


def test_the_move_played_is_always_among_the_decisions_choices():
    session = Connect4Session(TiedSearch(), human_seat=1)
    assert isinstance(session, PlaySession) and session.players == ["agent", "you"]
    (step,) = session.advance()
    top = [c.action for c in step.decision.top]
    assert step.action == "7" and top[-1] == "7" and len(top) == 6 and step.decision.value == 0.25
    assert step.state["cells"] == [[0] * 7] * 6 and session.moves == [6]


def test_openings_and_seats():
    session = Connect4Session(TiedSearch(), opening=[3, 3])
    assert session.moves == [3, 3] and [m["id"] for m in session.legal()] == list("0123456")
    session.play("3")
    with pytest.raises(IllegalMove, match="not your turn"):
        session.play("3")
    with pytest.raises(ConfigError, match="opening move 0 after"):
        Connect4Session(TiedSearch(), opening=[0] * 7)
    with pytest.raises(ConfigError, match="accepted 0 .* or 1"):
        Connect4Session(TiedSearch(), human_seat=2)
