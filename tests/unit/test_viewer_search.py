"""A replay step's decision from a native search report: most visited first, the prior as the
probability, the root value, nothing for a player that does not search."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from meeple.viewer.replay import Choice
from meeple.viewer.search import search_decision


def player(visits, prior, value=0.25):
    return SimpleNamespace(last_search={"visits": np.array(visits), "prior": np.array(prior, np.float32),
                                        "root_value": value})


def test_most_visited_first_ties_by_prior_and_unreachable_actions_left_out():
    decision = search_decision(player([3, 0, 5, 3, 0], [0.1, 0.0, 0.5, 0.3, 0.1]), lambda a: f"m{a}", top=4)
    assert [c.action for c in decision.top] == ["m2", "m3", "m0", "m4"]
    assert decision.top[0] == Choice("m2", 0.5, 5) and decision.value == 0.25
    assert [c.action for c in search_decision(player([1, 0], [1.0, 0.0]), str).top] == ["0"]  # no prior, no visit


def test_no_search_no_decision_and_a_nan_value_is_none():
    assert search_decision(SimpleNamespace(), str) is None
    assert search_decision(SimpleNamespace(last_search=None), str) is None
    assert search_decision(player([1], [1.0], value=math.nan), str).value is None


def test_the_played_action_is_always_listed():
    # visits tie between 0 and 1; the search played 1, which the prior order leaves out of the top 1
    search = player([4, 4, 1], [0.6, 0.3, 0.1])
    assert [c.action for c in search_decision(search, str, top=1).top] == ["0"]
    assert [c.action for c in search_decision(search, str, top=1, played=1).top] == ["0", "1"]
    assert [c.action for c in search_decision(search, str, top=2, played=1).top] == ["0", "1"]
