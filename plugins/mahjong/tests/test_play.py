"""The play adapter without a browser (tests/browser/test_mahjong.py drives the page): whole games
through the PlaySession protocol, what the person sees, refusals, and the log replaying through
the engine as any MJAI log."""

from __future__ import annotations

import json

import numpy as np
import pytest

from meeple.errors import ConfigError
from meeple.viewer.play_session import IllegalMove, PlaySession
from meeple_mahjong.mjai import replay
from meeple_mahjong.play import MahjongSession, first_legal


def play_out(session: MahjongSession, rng: np.random.Generator) -> int:
    """The person's moves drawn at random from legal(); returns how many they made."""
    moves = 0
    session.advance()
    while not session.finished:
        legal = session.legal()
        assert legal, "the game waits on the person but offers no move"
        session.play(legal[rng.integers(len(legal))]["id"])
        moves += 1
        session.advance()
    return moves


@pytest.mark.parametrize("seat", [0, 3])
def test_a_whole_game_hides_the_others_and_logs_a_replayable_game(seat):
    session = MahjongSession(first_legal, seed=11, human_seat=seat)
    assert isinstance(session, PlaySession) and session.players[seat] == "you"
    assert session.players[(seat + 2) % 4] == "agent" and session.players.count("rule") == 2
    state = session.state()
    assert state["pov"] == seat and isinstance(state["hands"][seat], list)
    assert all(isinstance(state["hands"][s], int) for s in range(4) if s != seat)  # backs only
    assert play_out(session, np.random.default_rng(seat)) > 0 and session.legal() == []
    result = session.result()
    assert sorted(result["ranks"]) == [1, 2, 3, 4] and f"placed {result['ranks'][seat]} of 4" in result["text"]
    assert all(isinstance(h, list) for h in session.state()["hands"])  # shown once the game is over
    name, text = session.log()
    lines = text.splitlines()
    assert name == "mahjong.mjson" and json.loads(lines[0])["names"] == session.players
    report = replay(lines, east_only=True)
    assert report.ok, str(report)
    assert report.final_scores == [result["scores"]]


def test_illegal_moves_are_refused_in_one_line_and_change_nothing():
    session = MahjongSession(first_legal, seed=3, human_seat=1)
    with pytest.raises(IllegalMove, match="not your turn"):  # the dealer (seat 0) acts first
        session.play("0")
    session.advance()
    before = session.engine.event_count
    legal = {m["id"] for m in session.legal()}
    for bad in ("154", "-1", "x", "", "1e2", str(max(map(int, legal)) + 1)):
        if bad in legal:
            continue
        with pytest.raises(IllegalMove) as err:
            session.play(bad)
        assert "\n" not in str(err.value) and "accepted ids" in str(err.value)
    assert session.engine.event_count == before


def test_bad_seats_are_config_errors():
    with pytest.raises(ConfigError, match="accepted 0-3"):
        MahjongSession(first_legal, seed=0, human_seat=4)
    with pytest.raises(ConfigError, match="other than your seat 1"):
        MahjongSession(first_legal, seed=0, human_seat=1, agent_seat=1)
