"""Connect Four as the AlphaZero phase's game: declared as an entry point (``meeple.games``), found
by the core's registry, loadable without torch, and playing the gate's matches."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

import meeple.plugins.registry as registry
from meeple.plugins.spec import AlphaZeroGame, MatchResult
from meeple_connect4.arena import RandomPlayer
from meeple_connect4.game import Connect4Game, game

PYPROJECT = Path(__file__).parents[1] / "pyproject.toml"


def declared() -> list[EntryPoint]:
    table = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"][registry.GAMES_GROUP]
    return [EntryPoint(name, value, registry.GAMES_GROUP) for name, value in table.items()]


@pytest.fixture
def only_declared(monkeypatch):
    """The registry sees exactly this plugin's declared games (the installed metadata may be older)."""
    real = registry.entry_points
    monkeypatch.setattr(registry, "entry_points", lambda group: declared()
                        if group == registry.GAMES_GROUP else real(group=group))  # fmt: skip
    registry.load_game.cache_clear()
    yield
    registry.load_game.cache_clear()


def test_declared_entry_point_is_the_game(only_declared):
    assert registry.installed_games() == ["connect4"]
    assert registry.load_game("connect4") is game
    assert isinstance(game, AlphaZeroGame)
    assert game.planes_shape == (3, 6, 7) and game.num_actions == 7


def test_selfplay_options_are_the_native_engine_keywords():
    assert {"num_simulations", "num_workers", "batch_size", "dirichlet_alpha"} <= game.selfplay_options
    assert not {"seed", "planes_buffers", "evaluator"} & game.selfplay_options


def test_the_game_module_imports_without_torch():
    code = "import sys, meeple_connect4.game; print(sorted(m for m in ('torch', 'lightning', 'torchrl') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_selfplay_engine_plays_games():
    engine = game.selfplay_engine(None, seed=1, planes_buffers=None, num_simulations=8,
                                  games_per_worker=2)  # fmt: skip
    try:
        out = engine.run(2)
    finally:
        engine.close()
    assert len(out["moves"]) == 2 and out["planes"].shape[1:] == game.planes_shape
    assert out["policy"].shape[1] == game.num_actions


def test_gate_match_through_the_protocol():
    # MCTS with rollouts (the native evaluator string) against random play: the gate's match.
    strong = game.mcts_player("rollout", num_simulations=200, leaves_in_flight=1, seed=1)
    result = game.play_match(strong, RandomPlayer(seed=2), 4, opening_moves=0)
    assert isinstance(result, MatchResult) and result.games == 4 and result.score >= 0.75, result
    assert isinstance(Connect4Game().play_match(RandomPlayer(3), RandomPlayer(4), 2, opening_moves=2), MatchResult)
