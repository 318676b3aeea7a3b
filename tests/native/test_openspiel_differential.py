"""meeple_native's Connect Four against OpenSpiel's ``connect_four`` (a peer we did not write).

10,000 random games are played in both engines side by side; at every ply the legal
moves, the terminal flag, the winner (through OpenSpiel's returns), the player to move
and the stones on the board (OpenSpiel's observation tensor) must agree.
"""

from __future__ import annotations

import numpy as np
import pytest

import meeple_native as mn

pyspiel = pytest.importorskip("pyspiel", reason="open-spiel is a [test] dependency: pip install -e '.[test]'")

GAMES = 10_000


def _spiel_winner(state) -> int | None:
    returns = state.returns()
    if returns[0] > 0:
        return 0
    if returns[1] > 0:
        return 1
    return None


def _compare(ours: mn.Connect4, theirs, planes: np.ndarray) -> None:
    assert ours.is_terminal() == theirs.is_terminal()
    if theirs.is_terminal():
        assert ours.winner() == _spiel_winner(theirs)
        assert ours.legal_moves() == []
        return
    assert ours.legal_moves() == theirs.legal_actions()
    assert ours.to_play == theirs.current_player()
    # Ours: (side to move, opponent, ones), row 0 = top. OpenSpiel: (player 0, player 1,
    # empty), row 0 = bottom.
    ours.encode(planes)
    spiel = np.asarray(theirs.observation_tensor(ours.to_play), np.float32).reshape(3, 6, 7)[:, ::-1]
    me = ours.to_play
    np.testing.assert_array_equal(planes[0], spiel[me])
    np.testing.assert_array_equal(planes[1], spiel[1 - me])


def test_random_games_match_openspiel():
    game = pyspiel.load_game("connect_four")
    rng = np.random.default_rng(20261121)
    planes = np.empty(mn.OBS_SHAPE, np.float32)
    endings = {0: 0, 1: 0, None: 0}
    plies = 0
    for g in range(GAMES):
        # Half the games avoid immediate wins where they can, so boards fill up, columns
        # close and draws at 42 stones occur; the other half are uniform random.
        avoid_wins = g % 2 == 1
        ours, theirs = mn.Connect4(), game.new_initial_state()
        _compare(ours, theirs, planes)
        while not theirs.is_terminal():
            legal = ours.legal_moves()
            if avoid_wins:
                quiet = [c for c in legal if not ours.is_winning_move(c)]
                legal = quiet or legal
            move = int(legal[rng.integers(len(legal))])
            ours.play(move)
            theirs.apply_action(move)
            plies += 1
            _compare(ours, theirs, planes)
        endings[ours.winner()] += 1
    assert plies > 20 * GAMES  # the games were real games, not early exits
    assert min(endings.values()) > 0, endings  # both players won some, and some were drawn
