"""Connect Four rules of meeple_native against the pure-Python reference."""

from __future__ import annotations

import copy
import pickle
import random

import numpy as np
import pytest

import meeple_native as mn
from tests.native.c4_reference import RefConnect4, random_game


def _check_same(game: mn.Connect4, ref: RefConnect4) -> None:
    assert game.moves_played == ref.n
    assert game.to_play == ref.to_play
    assert game.legal_moves() == ref.legal_moves()
    assert game.legal_mask() == sum(1 << c for c in ref.legal_moves())
    assert game.is_terminal() == ref.is_terminal()
    assert game.winner() == ref.won_by
    if not ref.is_terminal():
        assert game.result() is None
    else:
        assert game.result() == (-1 if ref.won_by is not None else 0)
    for c in range(7):
        assert game.height(c) == ref.height(c)
        assert game.is_legal(c) == (c in ref.legal_moves())
        assert game.is_winning_move(c) == (c in ref.legal_moves() and ref.wins_now(c))
    out = np.full(mn.OBS_SHAPE, -7.0, np.float32)
    game.encode(out)
    np.testing.assert_array_equal(out, ref.planes())


@pytest.mark.parametrize("avoid_wins", [False, True])
def test_random_games_match_reference(avoid_wins):
    rng = random.Random(1234 + avoid_wins)
    endings = {"first": 0, "second": 0, "draw": 0}
    for _ in range(150):
        moves = random_game(rng, avoid_wins=avoid_wins)
        game, ref = mn.Connect4(), RefConnect4()
        _check_same(game, ref)
        for c in moves:
            game.play(c)
            ref.play(c)
            _check_same(game, ref)
        assert game.is_terminal()
        endings[{0: "first", 1: "second", None: "draw"}[ref.won_by]] += 1
        # the same game from its 1-based move string
        again = mn.Connect4.from_moves("".join(str(c + 1) for c in moves))
        assert again == game and again.key() == game.key()
    if avoid_wins:  # the draw path (42 stones, no four) is exercised
        assert endings["draw"] > 0
    assert endings["first"] > 0 and endings["second"] > 0


def test_draw_at_42_stones():
    rng = random.Random(7)
    while True:
        moves = random_game(rng, avoid_wins=True)
        if len(moves) == 42:
            ref = RefConnect4()
            for c in moves:
                ref.play(c)
            if ref.won_by is None:
                break
    game = mn.Connect4.from_moves("".join(str(c + 1) for c in moves[:41]))
    assert not game.is_terminal() and game.legal_moves() == [moves[41]]
    game.play(moves[41])
    assert game.moves_played == 42
    assert game.is_terminal() and game.winner() is None and game.result() == 0
    assert game.legal_moves() == [] and game.legal_mask() == 0
    assert mn.solve(game) == 0


def test_win_in_every_direction():
    cases = {
        "vertical": "1212121",
        "horizontal": "1122334",
        "diagonal /": "12234334744",
        "diagonal \\": "76654554144",
    }
    for name, moves in cases.items():
        ref = RefConnect4()
        for ch in moves:
            ref.play(int(ch) - 1)
        assert ref.won_by == 0, name  # the reference agrees the first player just won
        g = mn.Connect4.from_moves(moves)
        assert g.is_terminal() and g.winner() == 0 and g.result() == -1, name
        before = mn.Connect4.from_moves(moves[:-1])
        assert not before.is_terminal() and before.is_winning_move(int(moves[-1]) - 1), name
    g = mn.Connect4.from_moves("2121213")  # X: 2,2,2,3 ; O: 1,1,1
    assert not g.is_terminal()
    g.play(0)  # O: four in column 1
    assert g.winner() == 1 and g.result() == -1


def test_key_unique_over_random_positions():
    rng = random.Random(99)
    seen: dict[int, tuple] = {}
    positions = 0
    for _ in range(1000):
        moves = random_game(rng, avoid_wins=rng.random() < 0.5)
        game, ref = mn.Connect4(), RefConnect4()
        for c in [None, *moves]:
            if c is not None:
                game.play(c)
                ref.play(c)
            k = game.key()
            assert 0 <= k < 2**49
            board = ref.board()
            assert seen.setdefault(k, board) == board, "two different boards share a key"
            positions += 1
    assert len(seen) > 20_000, (len(seen), positions)
    # transpositions: same stones reached in a different order give the same key
    assert mn.Connect4.from_moves("4453").key() == mn.Connect4.from_moves("5344").key()
    assert mn.Connect4.from_moves("4453") == mn.Connect4.from_moves("5344")
    assert hash(mn.Connect4.from_moves("44")) == mn.Connect4.from_moves("44").key()


def test_copy_is_independent_and_picklable():
    g = mn.Connect4.from_moves("4453")
    for h in (g.copy(), copy.copy(g), copy.deepcopy(g), pickle.loads(pickle.dumps(g))):
        assert h == g and h.key() == g.key() and h.moves_played == 4
        h.play(0)
        assert h != g and g.moves_played == 4 and g.height(0) == 0
    won = mn.Connect4.from_moves("1212121")
    back = pickle.loads(pickle.dumps(won))
    assert back.is_terminal() and back.winner() == 0


def test_repr_shows_board():
    text = repr(mn.Connect4.from_moves("4453"))
    lines = text.splitlines()
    assert "moves_played=4" in lines[0] and "to_play='X'" in lines[0]
    assert lines[5] == "|...O...|"
    assert lines[6] == "|..OXX..|"
    assert lines[-1].strip() == "1234567"


def test_encode_accepts_views_into_a_batch():
    batch = np.zeros((4, *mn.OBS_SHAPE), np.float32)
    mn.Connect4.from_moves("4").encode(batch[2])
    assert batch[2, 1, 5, 3] == 1.0 and batch[2, 0].sum() == 0 and batch[2, 2].sum() == 42
    assert batch[[0, 1, 3]].sum() == 0
    assert mn.NUM_PLANES == 3 and mn.OBS_SHAPE == (3, 6, 7) and (mn.WIDTH, mn.HEIGHT) == (7, 6)


# ---- bad input ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "moves, pieces",
    [
        ("44x3", ["'x'", "index 2"]),
        ("0", ["'0'", "index 0"]),
        ("8", ["'8'", "index 0"]),
        ("12 3", ["' '", "index 2"]),
        ("12é3", ["'é'", "index 2"]),
        ("4444444", ["column 4 is full", "index 6"]),
        ("12121213", ["after the game ended", "index 7"]),
    ],
)
def test_from_moves_errors_name_the_problem(moves, pieces):
    with pytest.raises(ValueError) as err:
        mn.Connect4.from_moves(moves)
    for piece in pieces:
        assert piece in str(err.value)


def test_play_errors():
    g = mn.Connect4()
    for bad in (-1, 7, 100):
        with pytest.raises(ValueError, match="out of range"):
            g.play(bad)
    for _ in range(6):
        g.play(2)
    with pytest.raises(ValueError, match="full"):
        g.play(2)
    assert not g.is_legal(2) and 2 not in g.legal_moves()
    won = mn.Connect4.from_moves("1212121")
    with pytest.raises(ValueError, match="game is over"):
        won.play(3)
    with pytest.raises(TypeError):
        g.play("3")


def test_encode_buffer_errors():
    g = mn.Connect4()
    with pytest.raises(TypeError, match="float32"):
        g.encode(np.zeros((3, 6, 7), np.float64))
    with pytest.raises(TypeError, match="float32"):
        g.encode(np.zeros((3, 6, 7), np.int32))
    with pytest.raises(ValueError, match=r"shape \(3, 6, 7\), got \(3, 7, 6\)"):
        g.encode(np.zeros((3, 7, 6), np.float32))
    with pytest.raises(ValueError, match="shape"):
        g.encode(np.zeros((2, 6, 7), np.float32))
    with pytest.raises(ValueError, match="shape"):
        g.encode(np.zeros((126,), np.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        g.encode(np.zeros((3, 6, 14), np.float32)[:, :, ::2])
    with pytest.raises(ValueError, match="C-contiguous"):
        g.encode(np.zeros((7, 6, 3), np.float32).transpose())
    ro = np.zeros((3, 6, 7), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        g.encode(ro)
    for junk in (None, [0.0] * 126, "buffer"):
        with pytest.raises(TypeError, match="numpy float32 array"):
            g.encode(junk)
