"""Gumbel root search, playout cap randomisation and the discount of meeple_native's search:
sequential halving's visit schedule, policy targets, the moves it finds, self-play records."""

from __future__ import annotations

import numpy as np
import pytest

import meeple_native as mn
from meeple.phases.alphazero.data import samples_to_tensordict
from tests.native.test_mcts import BLOCKS, WINS, uniform_evaluator
from tests.native.test_selfplay import Evaluator, check_samples


def schedule(m: int, n: int) -> list[int]:
    """Visits per considered move after n simulations of sequential halving over m moves, by
    hand from the rule (rounds = ceil(log2 m); each round gives each remaining move
    max(1, n // (rounds * remaining)) visits, then keeps the better half, at least 2)."""
    rounds = max(1, (m - 1).bit_length())
    visits, remaining, used = [0] * m, m, 0
    while used < n:
        for _ in range(max(1, n // (rounds * remaining))):
            for i in range(remaining):
                if used < n:
                    visits[i] += 1
                    used += 1
        remaining = max(2, remaining // 2)
    return sorted(visits)


@pytest.mark.parametrize("considered, sims, want", [
    (4, 8, [0, 0, 0, 1, 1, 3, 3]),            # 4 of 7 moves: 1 visit each, then 2 more for the best 2
    (16, 32, [1, 1, 1, 1, 4, 12, 12]),        # all 7 moves: 7 x 1, 3 x 3 more, then 2 split the rest
    (2, 5, [0, 0, 0, 0, 0, 2, 3]),
])
def test_sequential_halving_visit_counts(considered, sims, want):
    assert schedule(min(considered, 7), sims) == [v for v in want if v]
    search = mn.MCTS(num_simulations=sims, gumbel=True, gumbel_considered=considered, seed=4)
    result = search.search(mn.Connect4(), uniform_evaluator)
    assert sorted(result["visits"].tolist()) == want
    assert result["simulations"] == sims and result["virtual_loss"] == 0


@pytest.mark.parametrize("evaluator", [None, uniform_evaluator], ids=["builtin", "python"])
@pytest.mark.parametrize("leaves", [1, 4])
def test_gumbel_finds_wins_and_blocks(evaluator, leaves):
    for moves, answers in WINS + BLOCKS:
        search = mn.MCTS(num_simulations=200, gumbel=True, leaves_in_flight=leaves, seed=len(moves))
        result = search.search(mn.Connect4.from_moves(moves), evaluator)
        assert result["best_move"] in answers, (moves, result["visits"])
        target = result["policy_target"]
        assert target.sum() == pytest.approx(1.0, abs=1e-5)
        assert int(target.argmax()) in answers, (moves, target)


def test_policy_target_is_visits_without_gumbel_and_zero_on_illegal_moves():
    position = mn.Connect4.from_moves("1111112")  # column 1 is full
    plain = mn.MCTS(num_simulations=40).search(position, uniform_evaluator)
    assert np.allclose(plain["policy_target"], plain["visits"] / plain["visits"].sum())
    gumbel = mn.MCTS(num_simulations=40, gumbel=True).search(position, uniform_evaluator)
    assert gumbel["policy_target"][0] == 0.0 and gumbel["policy_target"].sum() == pytest.approx(1.0, abs=1e-5)


def test_gumbel_self_play_records_improved_policy():
    evaluator = Evaluator()  # prefers the centre column, values from the centre's stones
    out = mn.SelfPlay(evaluator, num_simulations=16, gumbel=True, num_workers=2, games_per_worker=2,
                      leaves_per_game=2, batch_size=4, seed=7).run(6)
    check_samples(out, 6)
    assert out["full"].all()
    # the first move's target: softmax(logit + sigma(q)) raises the prior's favourite, the centre
    first = out["policy"][out["ply"] == 0]
    prior = np.exp(evaluator.weights) / np.exp(evaluator.weights).sum()
    assert (first.argmax(1) == 3).all() and (first[:, 3] > prior[3]).all()


def test_playout_cap_randomisation_marks_full_searches_and_training_keeps_only_them():
    out = mn.SelfPlay(uniform_evaluator, num_simulations=32, fast_simulations=4, full_search_prob=0.25,
                      seed=3).run(20)
    check_samples(out, 20)
    full = out["full"]
    assert full.dtype == np.bool_ and full.shape == out["value"].shape
    assert 0.1 < full.mean() < 0.4  # ~25% of the moves
    td = samples_to_tensordict(out, mirror=True)
    assert len(td) == 2 * int(full.sum())
    assert np.array_equal(td["value"][: int(full.sum())].numpy(), out["value"][full])
    always = mn.SelfPlay(uniform_evaluator, num_simulations=8, seed=3).run(2)
    assert always["full"].all()


def test_discounted_values_prefer_fast_wins():
    gamma = 0.9
    out = mn.SelfPlay(uniform_evaluator, num_simulations=8, discount=gamma, seed=5).run(6)
    k = 0
    for gi, moves in enumerate(out["moves"]):
        result = mn.Connect4.from_moves(moves).winner()
        for ply in range(len(moves)):
            left = len(moves) - ply  # plies from this position to the end
            mover = ply % 2
            want = 0.0 if result is None else (1.0 if result == mover else -1.0) * gamma**left
            assert out["value"][k] == pytest.approx(want, rel=1e-5), (gi, ply)
            k += 1
    # in the tree a win in one is worth gamma and the search still plays it
    search = mn.MCTS(num_simulations=100, discount=gamma)
    result = search.search(mn.Connect4.from_moves("112233"), None)
    assert result["best_move"] == 3 and result["q"][3] == pytest.approx(gamma)


@pytest.mark.parametrize("option, value, message", [
    ("gumbel_considered", 0, "gumbel_considered must be 1..4096"),
    ("gumbel_c_scale", 0.0, "gumbel_c_scale must be > 0"),
    ("discount", 0.0, r"discount must be in \(0, 1\]"),
    ("discount", 1.5, r"discount must be in \(0, 1\]"),
    ("fast_simulations", 40, r"fast_simulations must be 0..num_simulations \(32\)"),
    ("full_search_prob", 1.5, r"full_search_prob must be in \[0, 1\]"),
])
def test_bad_search_options(option, value, message):
    with pytest.raises(ValueError, match=message):
        mn.SelfPlay(None, num_simulations=32, **{option: value})


def test_next_game_id_resumes_the_same_games():
    first = mn.SelfPlay(None, num_simulations=8, seed=9)
    first.run(3)
    assert first.next_game_id == 3
    later = first.run(2)
    again = mn.SelfPlay(None, num_simulations=8, seed=9)
    again.next_game_id = 3
    assert list(again.run(2)["moves"]) == list(later["moves"])
