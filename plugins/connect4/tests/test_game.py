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
    assert {"num_simulations", "num_workers", "batch_size", "dirichlet_alpha", "gumbel", "gumbel_considered",
            "discount", "fast_simulations", "full_search_prob"} <= game.selfplay_options  # fmt: skip
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


@pytest.mark.parametrize("override, message", [
    ("phase.game=go", "phase.game='go' is not allowed; accepted: "),  # the installed games follow
    # the accepted options come from the game (its native engine's keywords)
    ("+phase.selfplay.num_worker=2", "phase.selfplay.num_worker is not a self-play engine option; accepted: "
                                     "batch_size, c_puct, cache_size, dirichlet_alpha"),
])  # fmt: skip
def test_game_config_errors_are_one_line_before_torch(tmp_path, override, message):
    """Validation names games from entry-point metadata and loads only a known, torch-free game module."""
    train = Path(__file__).resolve().parents[3] / "train.py"
    done = subprocess.run([sys.executable, "-X", "importtime", str(train), "+experiment=connect4_alphazero",
                           override], cwd=tmp_path, capture_output=True, text=True, timeout=120)  # fmt: skip
    lines = [line for line in done.stderr.splitlines() if not line.startswith("import time:")]
    assert done.returncode == 2 and len(lines) == 1 and message in lines[0], done.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert not {"torch", "lightning", "torchrl"} & imported
