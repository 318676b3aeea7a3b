"""Connect Four players, matches and benchmark sets: players against the exact solver, pure MCTS
against random play, optimal-move shares, Pons' file errors."""

from __future__ import annotations

import numpy as np
import pytest

import meeple_native as mn
from meeple.errors import MeepleError
from meeple.nets.az_resnet import AZResNet
from meeple_connect4.arena import (
    MCTSPlayer,
    RandomPlayer,
    SolverPlayer,
    play_from_positions,
    play_match,
)
from meeple_connect4.benchmark import (
    GENERATED,
    generate_benchmark,
    load_benchmark,
    player_moves,
    policy_moves,
)

END_GAME = GENERATED[0]
assert END_GAME.name == "generated_end"


def test_solver_beats_random_and_perfect_play_keeps_every_value():
    solver = mn.Solver(tt_log2=20)
    # (From the empty board the solver needs minutes per move: games start from benchmark positions.)
    bench = generate_benchmark(END_GAME, 40, seed=0, solver=solver)
    won = [p for p, s in zip(bench.positions, bench.scores) if s > 0][:10]
    assert len(won) == 10
    result, _ = play_from_positions(SolverPlayer(solver, seed=1), RandomPlayer(seed=2), won, [1] * len(won))
    assert result.wins == len(won), result
    # Solver against solver: each game ends with the position's exact value.
    starts = bench.positions[:20]
    result, kept = play_from_positions(SolverPlayer(solver, 3), SolverPlayer(solver, 4), starts, bench.scores[:20])
    assert kept == len(starts)
    assert result.wins == int((bench.scores[:20] > 0).sum())
    assert result.draws == int((bench.scores[:20] == 0).sum())
    # A random mover from the same positions loses some of the value.
    _, kept_random = play_from_positions(RandomPlayer(5), SolverPlayer(solver, 6), bench.positions[:40],
                                         bench.scores[:40])
    assert kept_random < 40


def test_pure_mcts_beats_random():
    result = play_match(MCTSPlayer("rollout", num_simulations=200, leaves_in_flight=1, seed=1), RandomPlayer(seed=2),
                        games=6, opening_moves=0)
    assert result.score >= 5 / 6, result


def test_benchmark_shares_match_the_solver():
    solver = mn.Solver(tt_log2=20)
    bench = generate_benchmark(END_GAME, 60, seed=1, solver=solver)
    assert len(bench) == 60
    perfect = player_moves(SolverPlayer(solver, 0), bench)
    assert bench.shares(perfect) == (1.0, 1.0)
    floor_optimal, floor_correct = bench.random_shares()
    assert 0 < floor_optimal <= floor_correct < 1
    # a network's policy choice is always a legal move
    net = AZResNet((3, 6, 7), 7, channels=8, blocks=1)
    moves = policy_moves(net, bench)
    assert bench.legal[np.arange(60), moves].all()


def test_benchmark_file_errors_name_the_line(tmp_path):
    bad = tmp_path / "Test_L3_R1"
    bad.write_text("112233 18\n44x3 5\n")  # first line: X wins with its 4th stone
    with pytest.raises(MeepleError, match=r"Test_L3_R1:2: .*bad character 'x'.*expected '<moves 1-7> <score>'"):
        load_benchmark(bad)
    bad.write_text("112233 7\n")
    with pytest.raises(MeepleError, match=r"Test_L3_R1:1: the solver scores '112233' 18, the file says 7"):
        load_benchmark(bad)
    with pytest.raises(MeepleError, match="does not exist"):
        load_benchmark(tmp_path / "missing")
