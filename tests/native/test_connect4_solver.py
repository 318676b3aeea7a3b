"""Exact solver of meeple_native: Pascal Pons' published benchmark positions,
brute force on nearly full boards, perfect-play rollouts, threads, bad input."""

from __future__ import annotations

import random
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import meeple_native as mn
from tests.conftest import SHARED_DATA, needs_shared
from tests.native.c4_reference import RefConnect4, random_game

DATA = SHARED_DATA / "connect4"
needs_pons = needs_shared("connect4")  # Pons' published positions and scores


def load(name: str) -> list[tuple[str, int]]:
    path = DATA / name
    assert path.is_file(), f"benchmark file missing: {path} (see shared/data/README.md)"
    rows = []
    for line in path.read_text().splitlines():
        if line.strip():
            moves, score = line.split()
            rows.append((moves, int(score)))
    assert len(rows) == 1000, (path, len(rows))
    return rows


@needs_pons
@pytest.mark.parametrize("name", ["Test_L3_R1", "Test_L2_R1"])
def test_published_scores(name):
    rows = load(name)
    solver = mn.Solver()
    start = time.perf_counter()
    wrong = [(moves, want, got) for moves, want in rows if (got := solver.solve(moves)) != want]
    elapsed = time.perf_counter() - start
    print(f"{name}: {len(rows)} positions in {elapsed:.3f} s, {solver.node_count} nodes")
    assert not wrong, f"{len(wrong)} wrong scores (moves, published, ours), first: {wrong[:5]}"


@needs_pons
def test_small_table_and_module_level_solve_agree():
    rows = load("Test_L2_R1")[::10]
    tiny = mn.Solver(tt_log2=18)  # heavy slot reuse still gives exact scores
    assert tiny.tt_size >= 2**18
    for moves, want in rows:
        assert tiny.solve(moves) == want, moves
        assert mn.solve(moves) == want, moves
        assert mn.solve(mn.Connect4.from_moves(moves)) == want, moves
    tiny.reset()
    assert tiny.solve(rows[0][0]) == rows[0][1]


def test_brute_force_on_nearly_full_boards():
    rng = random.Random(5)
    checked = 0
    while checked < 25:
        moves = random_game(rng, avoid_wins=True)
        if len(moves) < 40:
            continue
        ref = RefConnect4()
        for c in moves[:36]:
            ref.play(c)
        if ref.is_terminal():
            continue
        prefix = "".join(str(c + 1) for c in moves[:36])
        assert mn.solve(prefix) == ref.negamax(), prefix
        checked += 1


@needs_pons
def test_analyze_and_best_moves_are_consistent():
    solver = mn.Solver()
    for moves, want in load("Test_L3_R1")[:40] + load("Test_L2_R1")[:20]:
        scores = solver.analyze(moves)
        game = mn.Connect4.from_moves(moves)
        assert [s is not None for s in scores] == [game.is_legal(c) for c in range(7)]
        assert max(s for s in scores if s is not None) == want
        best = solver.best_moves(moves)
        assert best == [c for c, s in enumerate(scores) if s == want]
        assert best == mn.best_moves(game)


@needs_pons
def test_perfect_play_reaches_the_predicted_result():
    """Both sides follow best_moves from published positions; the game must end as the
    score says: winner = side to move iff score > 0, with 22 - |score| stones."""
    rng = random.Random(11)
    solver = mn.Solver()
    for moves, score in load("Test_L3_R1")[:60]:
        game = mn.Connect4.from_moves(moves)
        mover = game.to_play
        while not game.is_terminal():
            game.play(rng.choice(solver.best_moves(game)))
        if score == 0:
            assert game.winner() is None, moves
        else:
            assert game.winner() == (mover if score > 0 else 1 - mover), moves
            winner_stones = (game.moves_played + 1) // 2
            assert winner_stones == 22 - abs(score), moves
        assert solver.solve(game) == -abs(score)  # the side to move at the end has lost (or drawn)


def test_terminal_positions():
    assert mn.solve("1212121") == -(22 - 4)  # the first player won with 4 stones
    assert mn.analyze("1212121") == [None] * 7
    assert mn.best_moves("1212121") == []
    assert mn.solve("2121213" + "1") == -(22 - 4)  # the second player won with 4 stones
    assert mn.solve("121212") == 22 - 4  # wins at once


@needs_pons
def test_threads_share_nothing_but_agree():
    rows = load("Test_L2_R1")[:200]
    shared = mn.Solver()
    with ThreadPoolExecutor(2) as pool:
        assert list(pool.map(lambda r: mn.solve(r[0]), rows)) == [w for _, w in rows]
        assert list(pool.map(lambda r: shared.solve(r[0]), rows)) == [w for _, w in rows]


def test_solver_bad_input():
    with pytest.raises(ValueError, match="'8' at index 2"):
        mn.solve("448")
    with pytest.raises(ValueError, match="column 1 is full"):
        mn.Solver().best_moves("1111111")
    with pytest.raises(ValueError, match="after the game ended"):
        mn.analyze("12121212")
    with pytest.raises(ValueError, match="tt_log2"):
        mn.Solver(tt_log2=10)
    with pytest.raises(TypeError):
        mn.solve(4453)
