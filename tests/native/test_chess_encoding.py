"""Chess network encodings: the 4,672-move policy index and the 119 input planes.

Both are checked against small reference implementations written here from the layout in
docs/chess.md, on positions from python-chess random games (python-chess supplies the moves,
the history and the repetition counts, so neither side of a comparison comes from the code
under test alone).
"""

from __future__ import annotations

import random

import numpy as np
import pytest

chess = pytest.importorskip("chess")
native = pytest.importorskip("meeple_native.chess")

QUEEN_DIRS = [(0, 1), (1, 1), (1, 0), (1, -1), (0, -1), (-1, -1), (-1, 0), (-1, 1)]
KNIGHT_JUMPS = [(1, 2), (2, 1), (2, -1), (1, -2), (-1, -2), (-2, -1), (-2, 1), (-1, 2)]
UNDERPROMOTIONS = [chess.KNIGHT, chess.BISHOP, chess.ROOK]


def _sign(x: int) -> int:
    return (x > 0) - (x < 0)


def reference_action(move: chess.Move, turn: chess.Color) -> int:
    """docs/chess.md: action = move_type * 64 + from, squares flipped (s ^ 56) for black."""
    flip = 56 if turn == chess.BLACK else 0
    src, dst = move.from_square ^ flip, move.to_square ^ flip
    df = chess.square_file(dst) - chess.square_file(src)
    dr = chess.square_rank(dst) - chess.square_rank(src)
    if move.promotion in UNDERPROMOTIONS:
        kind = 64 + 3 * UNDERPROMOTIONS.index(move.promotion) + (df + 1)
    elif (df, dr) in KNIGHT_JUMPS:
        kind = 56 + KNIGHT_JUMPS.index((df, dr))
    else:
        kind = QUEEN_DIRS.index((_sign(df), _sign(dr))) * 7 + max(abs(df), abs(dr)) - 1
    return kind * 64 + src


def _rep_key(board: chess.Board) -> str:
    # pieces, side to move, castling rights, en passant square (only when legal)
    return " ".join(board.fen().split()[:4])


def reference_planes(history: list[chess.Board]) -> np.ndarray:
    """Planes of history[-1], given every position of the game so far (oldest first)."""
    cur = history[-1]
    us = cur.turn
    out = np.zeros((119, 8, 8), np.float32)
    keys = [_rep_key(b) for b in history]
    for t in range(min(8, len(history))):
        idx = len(history) - 1 - t
        board = history[idx]
        for sq, piece in board.piece_map().items():
            rank, file = chess.square_rank(sq), chess.square_file(sq)
            row = 7 - rank if us == chess.BLACK else rank
            plane = piece.piece_type - 1 + (0 if piece.color == us else 6)
            out[14 * t + plane, row, file] = 1.0
        reps = keys[:idx].count(keys[idx])
        out[14 * t + 12] = 1.0 if reps >= 1 else 0.0
        out[14 * t + 13] = 1.0 if reps >= 2 else 0.0
    out[112] = 1.0 if us == chess.BLACK else 0.0
    out[113] = cur.fullmove_number / 100.0
    out[114] = cur.has_kingside_castling_rights(us)
    out[115] = cur.has_queenside_castling_rights(us)
    out[116] = cur.has_kingside_castling_rights(not us)
    out[117] = cur.has_queenside_castling_rights(not us)
    out[118] = cur.halfmove_clock / 100.0
    return out


def _random_games(seed: int, games: int, plies: int, shuffle: float):
    """Yields (python-chess history, native board) after every ply of seeded random games."""
    rng = random.Random(seed)
    for _ in range(games):
        ref, ours = chess.Board(), native.Board()
        history = [ref.copy()]
        yield history, ours
        for _ in range(plies):
            if ours.is_game_over():
                break
            moves = list(ref.legal_moves)
            move = rng.choice(moves)
            if len(ref.move_stack) >= 2 and rng.random() < shuffle:
                last = ref.move_stack[-2]
                back = chess.Move(last.to_square, last.from_square)
                if back in moves:
                    move = back
            ref.push(move)
            ours.push(move.uci())
            history.append(ref.copy(stack=False))
            yield history, ours


PROMOTION_FENS = [
    "1n2k3/P1P5/8/8/8/8/5p1p/K5N1 w - - 0 1",  # white to move: pushes and capture-promotions
    "1n2k3/P1P5/8/8/8/8/5p1p/K5N1 b - - 0 1",  # black to move (flipped view)
    "r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1",  # both castlings
    "r3k2r/8/8/8/8/8/8/R3K2R b KQkq - 0 1",
    "4k3/8/8/2pP4/8/8/8/4K3 w - c6 0 1",  # en passant
]


def _positions():
    for fen in PROMOTION_FENS:
        yield chess.Board(fen), native.Board(fen)
    for history, ours in _random_games(seed=5, games=40, plies=200, shuffle=0.0):
        yield history[-1], ours


def test_policy_index_round_trip_over_every_legal_move() -> None:
    mask = np.zeros(native.NUM_ACTIONS, dtype=bool)
    moves_checked = underpromotions = 0
    for ref, ours in _positions():
        ucis = ours.legal_moves()
        actions = ours.legal_actions()
        assert len(actions) == len(set(actions)) == len(ucis)
        for uci, action in zip(ucis, actions, strict=True):
            assert action == reference_action(chess.Move.from_uci(uci), ref.turn), (ref.fen(), uci)
            assert ours.action_to_uci(action) == uci
            assert ours.uci_to_action(uci) == action
            underpromotions += uci[-1] in "nbr" and len(uci) == 5
        ours.legal_mask(mask)
        assert set(np.flatnonzero(mask).tolist()) == set(actions)
        # Playing by index and by UCI reach the same position.
        for uci, action in list(zip(ucis, actions, strict=True))[:5]:
            a, b = ours.copy(), ours.copy()
            a.push(uci)
            b.push_action(action)
            assert a.fen() == b.fen() and a.history_key() == b.history_key()
        moves_checked += len(actions)
    assert moves_checked > 3000 and underpromotions >= 12


@pytest.mark.parametrize("fen", [native.START_FEN, PROMOTION_FENS[0], PROMOTION_FENS[1]])
def test_every_action_decodes_and_maps_back(fen: str) -> None:
    board = native.Board(fen)
    kinds = {"queen": 0, "knight": 0, "under": 0}
    for action in range(native.NUM_ACTIONS):
        kind = action // 64
        try:
            uci = board.action_to_uci(action)
        except ValueError:
            continue  # leaves the board
        assert board.uci_to_action(uci) == action, (action, uci)
        kinds["queen" if kind < 56 else "knight" if kind < 64 else "under"] += 1
    # Queen moves from all 64 squares of an empty board: 1456; knight jumps: 336.
    assert kinds["queen"] == 1456 and kinds["knight"] == 336
    # One step forward (straight or diagonal) from ranks 1-7: 3 pieces x (56 + 2 * 49).
    assert kinds["under"] == 3 * (56 + 2 * 49)


def test_illegal_actions_and_moves_are_rejected() -> None:
    board = native.Board()
    with pytest.raises(ValueError, match="illegal"):
        board.push_action(0)  # a1 rook one step north: blocked by the pawn
    with pytest.raises(ValueError, match="not a move on the board"):
        board.push_action((7 * 7) * 64 + 0)  # direction NW (7), distance 1, from a1
    with pytest.raises(ValueError, match="malformed"):
        board.push("e2")
    with pytest.raises(ValueError, match="illegal"):
        board.push("e2e5")
    with pytest.raises(ValueError):
        board.uci_to_action("a1b4")


def test_planes_of_the_start_position_by_hand() -> None:
    board = native.Board()
    planes = np.full((119, 8, 8), -1.0, np.float32)
    board.encode(planes)
    # own pieces (white) on rows 0-1, row = rank for white
    assert planes[0, 1].tolist() == [1.0] * 8 and planes[0].sum() == 8  # pawns on rank 2
    assert planes[1, 0, 1] == planes[1, 0, 6] == 1.0 and planes[1].sum() == 2  # knights b1 g1
    assert planes[4, 0, 3] == 1.0 and planes[5, 0, 4] == 1.0  # queen d1, king e1
    assert planes[6, 6].tolist() == [1.0] * 8 and planes[11, 7, 4] == 1.0  # black pawns, king e8
    assert planes[12:112].sum() == 0  # no repetitions, no earlier positions
    assert planes[112].max() == 0.0  # white to move
    assert np.all(planes[113] == 0.01)  # full-move number 1 / 100
    assert np.all(planes[114:118] == 1.0) and np.all(planes[118] == 0.0)


def test_planes_after_e4_are_flipped_for_black() -> None:
    board = native.Board()
    board.push("e2e4")
    planes = np.zeros((119, 8, 8), np.float32)
    board.encode(planes)
    # black is the mover: its pawns (rank 7) on row 1, its king e8 on row 0, column 4
    assert planes[0, 1].tolist() == [1.0] * 8 and planes[5, 0, 4] == 1.0
    # white pawns: rank 2 -> row 6 except e2, which is on e4 -> row 4
    assert planes[6, 6].tolist() == [1, 1, 1, 1, 0, 1, 1, 1] and planes[6, 4, 4] == 1.0
    # one ply earlier: the start position from black's side
    assert planes[14, 1].tolist() == [1.0] * 8 and planes[20, 6].tolist() == [1.0] * 8
    assert np.all(planes[112] == 1.0)


def test_repetition_planes_and_threefold() -> None:
    board = native.Board()
    planes = np.zeros((119, 8, 8), np.float32)
    for uci in ["g1f3", "g8f6", "f3g1", "f6g8"]:
        board.push(uci)
    board.encode(planes)
    assert board.repetitions == 1 and np.all(planes[12] == 1.0) and np.all(planes[13] == 0.0)
    assert np.all(planes[14 + 12] == 0.0)  # the position one ply earlier occurred once
    for uci in ["g1f3", "g8f6", "f3g1", "f6g8"]:
        board.push(uci)
    board.encode(planes)
    assert board.repetitions == 2 and np.all(planes[13] == 1.0)
    assert board.termination() == "threefold_repetition" and board.result() == "1/2-1/2"


def test_planes_match_the_reference_along_random_games() -> None:
    planes = np.zeros((119, 8, 8), np.float32)
    checked = with_reps = 0
    for history, ours in _random_games(seed=11, games=20, plies=120, shuffle=0.5):
        ours.encode(planes)
        expected = reference_planes(history)
        bad = np.argwhere(planes != expected)
        assert bad.size == 0, (history[-1].fen(), bad[:5].tolist())
        checked += 1
        with_reps += bool(expected[12::14][:8].any())
    assert checked > 1000 and with_reps > 100


def test_encode_writes_into_a_batch_row_and_checks_buffers() -> None:
    batch = np.zeros((4, 119, 8, 8), np.float32)
    native.Board().encode(batch[2])
    assert batch[2].sum() > 0 and batch[0].sum() == batch[1].sum() == batch[3].sum() == 0
    board = native.Board()
    with pytest.raises(TypeError, match="float32"):
        board.encode(np.zeros((119, 8, 8), np.float64))
    with pytest.raises(ValueError, match="shape"):
        board.encode(np.zeros((118, 8, 8), np.float32))
    with pytest.raises(TypeError, match="bool"):
        board.legal_mask(np.zeros(4672, np.int8))
    read_only = np.zeros((119, 8, 8), np.float32)
    read_only.flags.writeable = False
    with pytest.raises(TypeError):
        board.encode(read_only)


def test_history_key_sees_the_history() -> None:
    a, b = native.Board(), native.Board()
    for uci in ["g1f3", "g8f6", "f3g1", "f6g8"]:
        a.push(uci)
    for uci in ["b1c3", "b8c6", "c3b1", "c6b8"]:
        b.push(uci)
    assert a.fen().split()[:4] == b.fen().split()[:4] and a.key() == b.key()
    assert a.history_key() != b.history_key()
    c = native.Board()
    for uci in ["g1f3", "g8f6", "f3g1", "f6g8"]:
        c.push(uci)
    assert c.history_key() == a.history_key()
