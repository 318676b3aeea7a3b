"""Auto-battler replays: the policy seat's decisions of a real game, decoded from its observations,
and their page through the declared ``meeple.viewers`` entry point."""

from __future__ import annotations

import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path

import numpy as np
import pytest

import meeple.plugins.registry as registry
from meeple.transport import node
from meeple.viewer.page import replay_html
from meeple_autobattler import layout as L
from meeple_autobattler.evaluate import opponent_act, play
from meeple_autobattler.policies import scripted_actions
from meeple_autobattler.replay import GameRecorder, action_label

PYPROJECT = Path(__file__).parents[1] / "pyproject.toml"


@pytest.fixture
def declared_viewer(monkeypatch):
    """The registry sees this plugin's declared viewer (the installed metadata may be older)."""
    table = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"][registry.VIEWERS_GROUP]
    eps = [EntryPoint(name, value, registry.VIEWERS_GROUP) for name, value in table.items()]
    real = registry.entry_points
    monkeypatch.setattr(registry, "entry_points",
                        lambda group: eps if group == registry.VIEWERS_GROUP else real(group=group))


def uniform(obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return mask / mask.sum(axis=1, keepdims=True)


def test_a_watched_game_is_the_seats_decisions_round_by_round(declared_viewer):
    node.build()
    recorder = GameRecorder(uniform)
    places = play(scripted_actions, opponent_act("random", 1), games=1, seed=1, watched=1,
                  watch=lambda game, obs, mask, action: recorder.record(obs, mask, action))
    replay = recorder.replay("a game", int(places[0]), ["scripted", *["random"] * 7])
    steps = replay.steps
    assert replay.result == {"place": int(places[0]), "decisions": len(steps) - 1}
    rounds = [s.state["round"] for s in steps[:-1]]
    assert rounds == sorted(rounds) and rounds[0] == 1 and len(set(rounds)) > 3
    for step in steps[:-1]:
        state = step.state
        assert 0 < state["hp"] <= L.START_HP and 1 <= state["level"] <= L.MAX_LEVEL
        assert sum(u is not None for u in state["board"]) <= state["level"]
        assert len(state["shop"]) == L.SHOP and len(state["others"]) == L.PLAYERS - 1
        assert step.decision.top[0].p == pytest.approx(1 / len(step.decision.top), abs=0.5)
    # the scripted player buys and places units, and every round after the first opens with its fight
    assert any(s.action.startswith("buy shop") for s in steps[:-1])
    assert any(u is not None for u in steps[-1].state["board"])
    assert all(s.marks and s.marks[0].startswith("fight-") for s in steps[1:-1] if s.note)
    assert steps[-1].marks == ["win" if places[0] == 1 else f"place-{places[0]}"]
    assert "meepleRenderers.autobattler" in replay_html(replay)


def test_action_labels_name_the_unit():
    unit = {"kind": 3, "name": "gale runner", "tier": 1, "star": 2}
    state = {"shop": [None, unit, None, None, None], "bench": [unit, None, None, None], "board": [None] * 16}
    assert action_label(L.A_END, state) == "end turn"
    assert action_label(L.A_BUY + 1, state) == "buy shop 2 (gale runner **)"
    assert action_label(L.A_SWAP + 0 * L.BOARD + 5, state) == "bench 1 <-> board 6 (gale runner **)"
    assert action_label(L.A_SELL_BOARD + 2, state) == "sell board 3"
