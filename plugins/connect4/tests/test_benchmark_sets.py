"""meeple's own Connect Four benchmark sets: seeded random play, labelled by the exact solver.

The labels are checked against a second, independent solver instance (a fresh transposition
table), and the label procedure against Pons' published scores when ``../shared`` is present.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import meeple_native as mn
from meeple.errors import MeepleError
from meeple_connect4.benchmark import GENERATED, generate_benchmark, is_trivial, label_moves

# Outside test data, next to the repository (absent from a user's clone): skipped when absent,
# failed when CI sets MEEPLE_REQUIRE_SHARED=1 (as the core's tests/conftest.py does).
PONS = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "connect4"
needs_pons = pytest.mark.skipif(
    not PONS.exists() and os.environ.get("MEEPLE_REQUIRE_SHARED") != "1",
    reason=f"outside test data {PONS} is absent (a clone without ../shared)",
)


@pytest.fixture(scope="module")
def sets():
    solver = mn.Solver(tt_log2=20)
    return [generate_benchmark(spec, 40, seed=7, solver=solver) for spec in GENERATED]


def test_generated_labels_agree_with_the_solver(sets):
    check = mn.Solver(tt_log2=20)
    for spec, bench in zip(GENERATED, sets):
        assert len(bench) == 40 and bench.name == spec.name
        assert len({p.key() for p in bench.positions}) == 40, "positions are distinct"
        for i, position in enumerate(bench.positions):
            lo, hi = spec.plies
            assert lo <= position.moves_played <= hi and not position.is_terminal()
            assert bench.scores[i] == check.solve(position)
            assert list(np.flatnonzero(bench.optimal[i])) == check.best_moves(position)
            values = check.analyze(position)
            keeps = [c for c, v in enumerate(values) if v is not None and np.sign(v) == np.sign(bench.scores[i])]
            assert list(np.flatnonzero(bench.correct[i])) == keeps
            assert list(np.flatnonzero(bench.legal[i])) == position.legal_moves()
            # nothing decided trivially: no win in one, and some legal move is not optimal
            assert not any(position.is_winning_move(c) for c in position.legal_moves())
            assert not bench.optimal[i, bench.legal[i]].all()
            planes = np.empty(mn.OBS_SHAPE, np.float32)
            position.encode(planes)
            assert np.array_equal(bench.planes[i], planes)


def test_a_seed_gives_the_same_set_everywhere(sets):
    again = generate_benchmark(GENERATED[1], 40, seed=7)
    assert [p.key() for p in again.positions] == [p.key() for p in sets[1].positions]
    other = generate_benchmark(GENERATED[1], 40, seed=8)
    assert [p.key() for p in other.positions] != [p.key() for p in sets[1].positions]


def test_trivial_positions_are_recognised():
    solver = mn.Solver(tt_log2=18)
    win_in_one = mn.Connect4.from_moves("121212")  # the first player completes column 1
    assert is_trivial(win_in_one, label_moves(solver, win_in_one)[1])


def test_a_bad_count_is_one_error():
    with pytest.raises(MeepleError, match=r"generated benchmark positions = 0; accepted: an integer >= 1"):
        generate_benchmark(GENERATED[0], 0, seed=1)


@needs_pons
@pytest.mark.parametrize("name", ["Test_L3_R1", "Test_L2_R1"])
def test_label_procedure_agrees_with_pons(name):
    solver = mn.Solver()
    rows = [line.split() for line in (PONS / name).read_text().splitlines() if line.strip()]
    for moves, score in rows[::5]:
        position = mn.Connect4.from_moves(moves)
        legal, optimal, correct, best = label_moves(solver, position)
        assert best == int(score), moves
        assert list(np.flatnonzero(optimal)) == solver.best_moves(position)
        assert optimal.sum() >= 1 and (optimal <= correct).all() and (correct <= legal).all()
