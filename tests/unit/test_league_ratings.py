"""League ratings: Plackett-Luce per table, duplicated seats averaged, inheritance, exact resume."""

from __future__ import annotations

import io

import pytest
import torch
from openskill.models import PlackettLuce

from meeple.phases.league.ratings import LeagueRatings


def _rated(**ratings: tuple[float, float]) -> LeagueRatings:
    league = LeagueRatings()
    for name, (mu, sigma) in ratings.items():
        league.add(name, mu, sigma)
    return league


def test_distinct_players_match_openskill_exactly():
    priors = {"a": (25.0, 8.0), "b": (27.0, 5.0), "c": (20.0, 7.5), "d": (30.0, 2.0)}
    league = _rated(**priors)
    ranks = [2, 0, 3, 1]
    league.update(list(priors), ranks)
    model = PlackettLuce()
    expected = model.rate([[model.rating(mu=mu, sigma=sigma)] for mu, sigma in priors.values()], ranks=ranks)
    for name, (post,) in zip(priors, expected, strict=True):
        assert league.rating(name) == (post.mu, post.sigma)
        assert league.games(name) == 1
    assert league.rating("b")[0] > 27.0 and league.rating("c")[0] < 20.0


def test_ties_match_openskill_and_tied_equals_move_together():
    league = _rated(a=(25.0, 8.0), b=(25.0, 8.0), c=(25.0, 8.0), d=(25.0, 8.0))
    league.update(["a", "b", "c", "d"], [0, 1, 1, 3])
    model = PlackettLuce()
    expected = model.rate([[model.rating(mu=25.0, sigma=8.0)] for _ in range(4)], ranks=[0, 1, 1, 3])
    assert [league.rating(n) for n in "abcd"] == [(r[0].mu, r[0].sigma) for r in expected]
    assert league.rating("b") == league.rating("c")


def test_duplicated_player_gets_the_mean_of_its_seats():
    league = _rated(learner=(25.0, 6.0), x=(24.0, 7.0), y=(26.0, 5.0))
    league.update(["learner", "x", "learner", "y"], [0, 1, 3, 2])
    model = PlackettLuce()
    seats = [(25.0, 6.0), (24.0, 7.0), (25.0, 6.0), (26.0, 5.0)]
    post = [r[0] for r in model.rate([[model.rating(mu=m, sigma=s)] for m, s in seats], ranks=[0, 1, 3, 2])]
    assert league.rating("learner") == ((post[0].mu + post[2].mu) / 2, (post[0].sigma + post[2].sigma) / 2)
    assert league.rating("x") == (post[1].mu, post[1].sigma) and league.rating("y") == (post[3].mu, post[3].sigma)
    assert league.games("learner") == 1  # one game, however many seats

    # Only copies of one network at the table: no information, nothing changes.
    before = league.state_dict()
    league.update(["x", "x", "x", "x"], [0, 1, 2, 3])
    assert league.state_dict() == before


def test_inherit_widens_sigma_up_to_the_initial_sigma():
    league = _rated(learner=(31.0, 2.0))
    league.inherit("v0001", "learner", 1.5)
    assert league.rating("v0001") == (31.0, 3.5)
    league.add("fresh")
    league.inherit("v0002", "fresh", 1.5)
    assert league.rating("v0002") == (25.0, 25.0 / 3.0)
    with pytest.raises(ValueError, match="sigma_widen"):
        league.inherit("v0003", "learner", -1.0)


def test_conservative_best_table_and_errors():
    league = _rated(lucky=(35.0, 8.0), steady=(27.0, 1.0))
    assert league.conservative("steady") == 24.0
    assert league.best() == "steady" and league.best(["lucky"]) == "lucky"
    assert [row["name"] for row in league.table()] == ["steady", "lucky"]
    assert set(league.table()[0]) == {"name", "mu", "sigma", "conservative", "games"}
    with pytest.raises(KeyError, match="'nobody' is not rated"):
        league.update(["lucky", "nobody"], [0, 1])
    with pytest.raises(ValueError, match="one rank per seat"):
        league.update(["lucky", "steady"], [0])
    with pytest.raises(ValueError, match="already rated"):
        league.add("lucky")


def test_state_round_trip_is_exact_through_torch_save():
    league = _rated(a=(25.0, 8.0), b=(23.0, 4.0), c=(29.0, 6.0), d=(21.0, 3.0))
    for ranks in ([0, 1, 2, 3], [3, 2, 1, 0], [1, 1, 0, 2]):
        league.update(["a", "b", "c", "d"], ranks)
    buffer = io.BytesIO()
    torch.save(league.state_dict(), buffer)
    restored = LeagueRatings()
    restored.load_state_dict(torch.load(io.BytesIO(buffer.getvalue()), weights_only=True))
    assert restored.state_dict() == league.state_dict()
    for league_ in (league, restored):
        league_.update(["a", "c", "b", "d"], [2, 0, 1, 3])
    assert restored.state_dict() == league.state_dict()
    with pytest.raises(ValueError, match="expected keys"):
        restored.load_state_dict({"ratings": {}})
