"""meeple's chess rules against python-chess over thousands of seeded random games.

At every ply both libraries must agree on the legal moves (UCI), the FEN (python-chess's
default FEN: en passant square only when a capture there is legal), check, checkmate,
stalemate, insufficient material, the 50-move rule, repetitions and the result.

Draw rules (docs/chess.md): meeple ends the game at once when python-chess's
``is_fifty_moves()`` (half-move clock >= 100 with a legal move) or ``is_repetition(3)`` holds,
so both are compared with those predicates, and a finished game's result with
``outcome(claim_draw=True)``. python-chess's automatic 75-move and fivefold rules can never be
reached first.

Three kinds of games, to reach every rule often: random games from the initial position;
games that shuffle pieces back and forth (repetitions); random sparse positions (few
pieces: insufficient material, 50-move draws, promotions, stalemates).
"""

from __future__ import annotations

import random

import pytest

chess = pytest.importorskip("chess")
native = pytest.importorskip("meeple_native.chess")

EXPECTED_TERMINATION = [
    ("checkmate", lambda b: b.is_checkmate()),
    ("insufficient_material", lambda b: b.is_insufficient_material()),
    ("stalemate", lambda b: b.is_stalemate()),
    ("fifty_moves", lambda b: b.is_fifty_moves()),
    ("threefold_repetition", lambda b: b.is_repetition(3)),
]


def _expected_termination(ref: chess.Board) -> str | None:
    for name, test in EXPECTED_TERMINATION:
        if test(ref):
            return name
    return None


def _compare(ref: chess.Board, ours, counts: dict[str, int]) -> None:
    where = ref.fen()
    assert sorted(ours.legal_moves()) == sorted(m.uci() for m in ref.legal_moves), where
    assert ours.fen() == ref.fen(), where
    assert ours.is_check() == ref.is_check(), where
    assert ours.is_checkmate() == ref.is_checkmate(), where
    assert ours.is_stalemate() == ref.is_stalemate(), where
    assert ours.is_insufficient_material() == ref.is_insufficient_material(), where
    assert ours.is_fifty_moves() == ref.is_fifty_moves(), where
    assert ours.is_repetition() == ref.is_repetition(3), where
    assert (ours.repetitions >= 1) == ref.is_repetition(2), where
    expected = _expected_termination(ref)
    assert ours.termination() == expected, where
    assert ours.is_game_over() == (expected is not None), where
    if expected is None:
        assert ours.result() == "*"
        assert ref.outcome(claim_draw=False) is None, where
    else:
        outcome = ref.outcome(claim_draw=True)
        assert outcome is not None and ours.result() == outcome.result(), where
        counts[expected] += 1
    counts["plies"] += 1


def _play(ref: chess.Board, ours, rng: random.Random, max_plies: int, shuffle: float,
          counts: dict[str, int]) -> None:
    _compare(ref, ours, counts)
    for _ in range(max_plies):
        if ours.is_game_over():
            return
        moves = list(ref.legal_moves)
        move = rng.choice(moves)
        # Castling and en passant are rare in random play: take them half the time.
        special = [m for m in moves if ref.is_castling(m) or ref.is_en_passant(m)]
        if special and rng.random() < 0.5:
            move = rng.choice(special)
        # Undo our own last move when we can (a knight or king going back): repetitions.
        if shuffle and len(ref.move_stack) >= 2 and rng.random() < shuffle:
            last = ref.move_stack[-2]
            back = chess.Move(last.to_square, last.from_square)
            if back in moves and not ref.is_zeroing(back):
                move = back
        if move.promotion is not None:
            counts["promotions"] += 1
        if ref.is_castling(move):
            counts["castles"] += 1
        if ref.is_en_passant(move):
            counts["en_passant"] += 1
        ref.push(move)
        ours.push(move.uci())
        _compare(ref, ours, counts)


def _sparse_position(rng: random.Random) -> chess.Board:
    """A random valid position with both kings and 1-5 other pieces, no castling."""
    while True:
        board = chess.Board(None)
        squares = rng.sample(range(64), 7)
        board.set_piece_at(squares[0], chess.Piece(chess.KING, chess.WHITE))
        board.set_piece_at(squares[1], chess.Piece(chess.KING, chess.BLACK))
        for sq in squares[2:2 + rng.randint(1, 5)]:
            kind = rng.choice([chess.PAWN, chess.PAWN, chess.KNIGHT, chess.BISHOP, chess.ROOK, chess.QUEEN])
            board.set_piece_at(sq, chess.Piece(kind, rng.random() < 0.5))
        board.turn = rng.random() < 0.5
        board.halfmove_clock = rng.choice([0, 0, 60, 90, 98])
        if board.is_valid():
            return board


def _new_counts() -> dict[str, int]:
    keys = ["plies", "promotions", "castles", "en_passant"] + [n for n, _ in EXPECTED_TERMINATION]
    return dict.fromkeys(keys, 0)


def test_random_games_from_the_start_position() -> None:
    rng, counts = random.Random(20261124), _new_counts()
    for _ in range(200):
        _play(chess.Board(), native.Board(), rng, max_plies=400, shuffle=0.0, counts=counts)
    assert counts["checkmate"] > 5 and counts["castles"] > 50 and counts["en_passant"] > 20, counts
    assert counts["insufficient_material"] > 10 and counts["fifty_moves"] > 5, counts


def test_games_with_repetitions() -> None:
    rng, counts = random.Random(7), _new_counts()
    for _ in range(600):
        _play(chess.Board(), native.Board(), rng, max_plies=60, shuffle=0.6, counts=counts)
    assert counts["threefold_repetition"] > 100, counts


def test_random_sparse_positions() -> None:
    rng, counts = random.Random(1234), _new_counts()
    for _ in range(1200):
        ref = _sparse_position(rng)
        ours = native.Board(ref.fen())
        _play(ref, ours, rng, max_plies=120, shuffle=0.2, counts=counts)
    for kind in ("checkmate", "stalemate", "insufficient_material", "fifty_moves", "threefold_repetition"):
        assert counts[kind] > 5, counts
    assert counts["promotions"] > 50, counts
