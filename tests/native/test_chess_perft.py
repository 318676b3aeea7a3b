"""Chess move generation against published perft counts.

Counts of the start position, "Kiwipete" and positions 3-6 are from the Chess Programming
Wiki's "Perft Results" page; the five special cases (en passant that exposes the king,
castling that gives check) are from Martin Sedlak's TalkChess perft suite. Depths are chosen
so that each count takes at most a few seconds in C++ on a busy 2-core machine; the deepest
ones are marked slow.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

chess_native = pytest.importorskip("meeple_native.chess")

START = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1"
KIWIPETE = "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1"
POS3 = "8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1"
POS4 = "r3k2r/Pppp1ppp/1b3nbN/nP6/BBP1P3/q4N2/Pp1P2PP/R2Q1RK1 w kq - 0 1"
POS4_MIRRORED = "r2q1rk1/pP1p2pp/Q4n2/bbp1p3/Np6/1B3NBn/pPPP1PPP/R3K2R b KQ - 0 1"
POS5 = "rnbq1k1r/pp1Pbppp/2p5/8/2B5/8/PPP1NnPP/RNBQK2R w KQ - 1 8"
POS6 = "r4rk1/1pp1qppp/p1np1n2/2b1p1B1/2B1P1b1/P1NP1N2/1PP1QPPP/R4RK1 w - - 0 10"

# (name, fen, [perft(1), perft(2), ...]) as published
PUBLISHED = [
    ("start", START, [20, 400, 8902, 197281, 4865609, 119060324]),
    ("kiwipete", KIWIPETE, [48, 2039, 97862, 4085603, 193690690]),
    ("position3", POS3, [14, 191, 2812, 43238, 674624, 11030083, 178633661]),
    ("position4", POS4, [6, 264, 9467, 422333, 15833292, 706045033]),
    ("position4_mirrored", POS4_MIRRORED, [6, 264, 9467, 422333, 15833292, 706045033]),
    ("position5", POS5, [44, 1486, 62379, 2103487, 89941194]),
    ("position6", POS6, [46, 2079, 89890, 3894594, 164075551, 6923051137]),
]
# Depths above these run only with the slow marker (the deepest count of each row).
FAST_MAX_DEPTH = {"start": 6, "kiwipete": 5, "position3": 7, "position4": 5, "position4_mirrored": 5,
                  "position5": 5, "position6": 5}

SPECIAL_CASES = [
    ("illegal_ep_1", "3k4/3p4/8/K1P4r/8/8/8/8 b - - 0 1", 6, 1134888),
    ("illegal_ep_2", "8/8/4k3/8/2p5/8/B2P2K1/8 w - - 0 1", 6, 1015133),
    ("ep_capture_checks", "8/8/1k6/2b5/2pP4/8/5K2/8 b - d3 0 1", 6, 1440467),
    ("short_castling_check", "5k2/8/8/8/8/8/8/4K2R w K - 0 1", 6, 661072),
    ("long_castling_check", "3k4/8/8/8/8/8/8/R3K3 w Q - 0 1", 6, 803711),
]


def _cases(slow: bool):
    for name, fen, counts in PUBLISHED:
        for depth, count in enumerate(counts, start=1):
            if (depth > FAST_MAX_DEPTH[name]) == slow:
                yield pytest.param(fen, depth, count, id=f"{name}-d{depth}")


@pytest.mark.parametrize(("fen", "depth", "count"), list(_cases(slow=False)))
def test_published_perft(fen: str, depth: int, count: int) -> None:
    assert chess_native.perft(fen, depth) == count


@pytest.mark.slow
@pytest.mark.parametrize(("fen", "depth", "count"), list(_cases(slow=True)))
def test_published_perft_deep(fen: str, depth: int, count: int) -> None:
    """Split at the root (Board.push, then the child's FEN) over every core: perft releases the
    GIL, and position 6 at depth 6 (6.9 billion leaves) takes ~55 s on one core."""
    board = chess_native.Board(fen)

    def child_count(move: str) -> int:
        child = chess_native.Board(fen)
        child.push(move)
        return chess_native.perft(child.fen(), depth - 1)

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        assert sum(pool.map(child_count, board.legal_moves())) == count


@pytest.mark.parametrize(("name", "fen", "depth", "count"), SPECIAL_CASES, ids=[c[0] for c in SPECIAL_CASES])
def test_special_case_perft(name: str, fen: str, depth: int, count: int) -> None:
    assert chess_native.perft(fen, depth) == count


def test_board_perft_matches_module_perft() -> None:
    board = chess_native.Board(KIWIPETE)
    assert board.perft(3) == chess_native.perft(KIWIPETE, 3) == 97862
    assert board.perft(0) == 1


def test_perft_releases_the_gil() -> None:
    """This thread keeps running Python while another thread counts 119 M leaves (~0.5 s)."""
    ticks = 0
    worker = threading.Thread(target=chess_native.perft, args=(START, 6))
    worker.start()
    while worker.is_alive():
        ticks += 1
    worker.join()
    # Were the GIL held, this loop would get the interpreter only after perft returned.
    assert ticks > 10_000


def test_bad_input_is_rejected() -> None:
    with pytest.raises(ValueError, match="depth"):
        chess_native.perft(START, -1)
    with pytest.raises(ValueError, match="one king"):
        chess_native.perft("8/8/8/8/8/8/8/8 w - - 0 1", 1)
    with pytest.raises(ValueError, match="side to move"):
        chess_native.Board("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR x KQkq - 0 1")
    with pytest.raises(ValueError, match="not to move is in check"):
        chess_native.Board("4k3/8/8/8/8/8/8/4RK2 w - - 0 1")


def test_fen_fields_are_split_on_any_whitespace_and_counters_must_be_integers() -> None:
    """set_fen tokenises without iostreams (a GCC 13 build crashed in ``istream >> int``)."""
    placement = START.split()[0]
    assert chess_native.Board(f"  {placement}\tw  KQkq -\n7 12 ").fen() == f"{placement} w KQkq - 7 12"
    assert chess_native.Board(f"{placement} w").fen() == f"{placement} w - - 0 1"
    with pytest.raises(ValueError, match="half-move clock must be an integer, got '5x'"):
        chess_native.Board(f"{placement} w KQkq - 5x 1")
    with pytest.raises(ValueError, match="full-move number must be an integer, got '99999999999'"):
        chess_native.Board(f"{placement} w KQkq - 0 99999999999")
    with pytest.raises(ValueError, match="unexpected trailing field 'extra'"):
        chess_native.Board(f"{placement} w KQkq - 0 1 extra")
    with pytest.raises(ValueError, match="at least piece placement"):
        chess_native.Board(placement)
