"""Chess as the AlphaZero phase's game: declared as an entry point (``meeple.games``), found by the
core's registry, loadable without torch, self-play samples of chess's shapes, and the gate's matches."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path

import numpy as np
import pytest

import meeple.plugins.registry as registry
from meeple.plugins.spec import AlphaZeroGame, MatchResult
from meeple_chess.arena import MCTSPlayer, RandomPlayer, play_game, play_match
from meeple_chess.game import game
from meeple_native.chess import Board

PYPROJECT = Path(__file__).parents[1] / "pyproject.toml"


def declared() -> list[EntryPoint]:
    table = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"][registry.GAMES_GROUP]
    return [EntryPoint(name, value, registry.GAMES_GROUP) for name, value in table.items()]


@pytest.fixture
def only_declared(monkeypatch):
    """The registry sees exactly this plugin's declared games."""
    real = registry.entry_points
    monkeypatch.setattr(registry, "entry_points", lambda group: declared()
                        if group == registry.GAMES_GROUP else real(group=group))  # fmt: skip
    registry.load_game.cache_clear()
    yield
    registry.load_game.cache_clear()


def test_declared_entry_point_is_the_game(only_declared):
    assert registry.installed_games() == ["chess"]
    assert registry.load_game("chess") is game
    assert isinstance(game, AlphaZeroGame)
    assert game.planes_shape == (119, 8, 8) and game.num_actions == 4672
    assert game.mirror_symmetric is False


def test_selfplay_options_are_the_native_engine_keywords():
    assert {"num_simulations", "num_workers", "batch_size", "dirichlet_alpha", "temperature_moves",
            "cache_size", "gumbel", "discount", "fast_simulations", "full_search_prob"} <= game.selfplay_options  # fmt: skip
    assert not {"seed", "planes_buffers", "evaluator"} & game.selfplay_options


def test_the_game_module_imports_without_torch():
    code = "import sys, meeple_chess.game; print(sorted(m for m in ('torch', 'lightning', 'torchrl') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_selfplay_engine_produces_chess_samples():
    engine = game.selfplay_engine(None, seed=1, planes_buffers=None, num_simulations=4, games_per_worker=2)
    try:
        out = engine.run(2)
    finally:
        engine.close()
    n = len(out["value"])
    assert len(out["moves"]) == 2 and n == sum(len(m) for m in out["moves"])
    assert out["planes"].shape == (n, *game.planes_shape) and out["planes"].dtype == np.float32
    assert out["policy"].shape == (n, game.num_actions) and out["legal"].shape == (n, game.num_actions)
    np.testing.assert_allclose(out["policy"].sum(1), 1.0, atol=1e-5)
    assert not (out["policy"] > 0)[~out["legal"]].any()  # visits only on legal moves
    assert set(np.unique(out["value"])) <= {-1.0, 0.0, 1.0}
    # every game ended by a rule of chess: replaying its moves reaches that ending
    for moves, termination in zip(out["moves"], out["termination"], strict=True):
        board = Board()
        for uci in moves:
            board.push(uci)
        assert board.is_game_over() and board.termination() == termination


def test_games_end_by_the_rules_with_legal_results():
    report = play_match(RandomPlayer(1), RandomPlayer(2), 4, opening_moves=2)
    assert report.result.games == 4 and sum(report.terminations.values()) == 4
    assert set(report.terminations) <= {"checkmate", "stalemate", "insufficient_material", "fifty_moves",
                                        "threefold_repetition"}  # fmt: skip
    assert all(p > 0 for p in report.plies)
    final = play_game((RandomPlayer(3), RandomPlayer(4)))
    assert final.is_game_over() and final.result() in {"1-0", "0-1", "1/2-1/2"}
    # adjudication stops a game early as a draw (the phase does not use it)
    short = play_match(RandomPlayer(5), RandomPlayer(6), 2, opening_moves=0, max_plies=10)
    assert short.plies == [10, 10] and short.result == MatchResult(0, 2, 0)
    assert short.terminations == {"max_plies": 2}


def test_colours_alternate_and_results_are_from_the_first_players_side():
    class Mover:
        """Records its colour and plays the first legal move."""

        def __init__(self):
            self.colours = set()

        def move(self, board, temperature=0.0):
            self.colours.add(board.to_play)
            return int(board.legal_actions()[0])

    first, second = Mover(), Mover()
    report = play_match(first, second, 2, opening_moves=0, max_plies=4)
    assert first.colours == second.colours == {0, 1}
    assert report.result.games == 2


def test_mate_is_found_and_scored_for_the_right_side():
    # White mates in one (back rank: Ra8#); the rollout search finds it and the match scores a win.
    fen = "6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1"
    player = MCTSPlayer("rollout", num_simulations=200, leaves_in_flight=1, seed=0)
    final = play_game((player, RandomPlayer(0)), Board(fen))
    assert final.is_checkmate() and final.result() == "1-0"


def test_gate_match_through_the_protocol():
    # Pure MCTS with random playouts against random play, colours alternating: the gate's match.
    # (64 playouts a move still lose a game in six to random play; 400 won 6 of 6 when measured)
    strong = game.mcts_player("rollout", num_simulations=400, leaves_in_flight=1, seed=1)
    result = game.play_match(strong, RandomPlayer(seed=2), 4, opening_moves=2)
    assert isinstance(result, MatchResult) and result.games == 4
    assert result.score >= 0.75, result
