"""Chess replays: a recorded game (positions, UCI moves, decisions from the search), its page
through the declared ``meeple.viewers`` entry point, and the benchmark's replay games."""

from __future__ import annotations

import pytest
import torch

from meeple.nets.az_resnet import AZResNet
from meeple.seeding import PhaseSeeds, SeedStreams
from meeple.viewer.page import replay_html
from meeple.viewer.renderers import renderer
from meeple_chess.arena import MCTSPlayer, RandomPlayer
from meeple_chess.callbacks import ChessBenchmark
from meeple_chess.replay import record_game
from meeple_native.chess import NUM_ACTIONS, PLANES_SHAPE, Board


def test_a_recorded_game_replays_move_by_move():
    search = MCTSPlayer("uniform", num_simulations=16, leaves_in_flight=1, seed=1)
    replay = record_game((search, RandomPlayer(seed=2)), ("mcts", "random"), "a game", max_plies=30)
    assert len(replay.steps) == replay.result["plies"] + 1 == 31
    board = Board()
    for step in replay.steps:
        assert step.state["fen"] == board.fen()
        if step.action is not None:
            assert step.action in board.legal_moves()
            board.push(step.action)
    white = [s for s in replay.steps[:-1] if s.actor == 0]
    # the top 5 by visits, and the move played when a tie in visits left it out
    assert all(s.decision is not None and len(s.decision.top) in (5, 6) for s in white)
    assert all(s.action in {c.action for c in s.decision.top} for s in white)
    assert all(s.decision is None for s in replay.steps[:-1] if s.actor == 1)
    top = white[0].decision.top
    assert [c.visits for c in top] == sorted((c.visits for c in top), reverse=True)
    assert all(len(c.action) in (4, 5) for c in top)  # UCI
    assert replay.result["termination"] == "max_plies" and replay.steps[-1].marks == ["draw"]
    assert replay.steps[1].state["last"] == replay.steps[0].action
    page = replay_html(replay)
    assert renderer("chess").js in page and "data-square" in page


def test_the_benchmark_replays_its_agent_against_pure_mcts():
    torch.manual_seed(0)
    net = AZResNet(tuple(PLANES_SHAPE), NUM_ACTIONS, channels=8, blocks=1).eval()
    bench = ChessBenchmark(every_n_iterations=1, agent_simulations=4, mcts_games=0, mcts_opponent_simulations=4,
                           opening_moves=2, mate_positions=0, replays=1)  # fmt: skip
    bench._datamodule = SeedStreams()
    bench._datamodule.seeds = PhaseSeeds(1, 0)
    bench.evaluate(net, torch.device("cpu"))
    (replay,) = bench.replay_games(None, 1, iteration=3)
    assert replay.players == ["agent", "pure MCTS (4 rollouts)"]
    assert replay.title == "chess iteration 3 game 1: agent vs pure MCTS (4 rollouts)"
    assert len(replay.steps) == replay.result["plies"] + 1
    assert all(s.decision is not None for s in replay.steps[:-1])  # both players search
    with pytest.raises(Exception, match="replays=-1; accepted: an integer >= 0"):
        ChessBenchmark(every_n_iterations=1, agent_simulations=4, mcts_games=0, mcts_opponent_simulations=4,
                       replays=-1)  # fmt: skip
