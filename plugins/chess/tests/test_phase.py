"""Chess in the AlphaZero phase: the mirror refusal, the evaluation callback, and the real CLI
(`+experiment=chess_alphazero debug=tiny`) in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from meeple.nets.az_resnet import AZResNet
from meeple.seeding import PhaseSeeds, SeedStreams
from meeple_chess.callbacks import ChessBenchmark, mate_in_one_positions
from meeple_native.chess import NUM_ACTIONS, PLANES_SHAPE

TRAIN = Path(__file__).resolve().parents[3] / "train.py"


def train(cwd: Path, *args: str, timeout: int = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TRAIN), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


@pytest.mark.parametrize("override, message", [
    ("phase.augment_mirror=true",
     "phase.augment_mirror=True is not allowed; accepted: false (game 'chess' declares no left-right symmetry)"),
    ("+phase.selfplay.num_worker=2", "phase.selfplay.num_worker is not a self-play engine option; accepted: "
                                     "batch_size, c_puct, cache_size, dirichlet_alpha"),
])  # fmt: skip
def test_config_mistakes_are_one_line_before_torch(tmp_path, override, message):
    done = subprocess.run([sys.executable, "-X", "importtime", str(TRAIN), "+experiment=chess_alphazero", override],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)  # fmt: skip
    lines = [line for line in done.stderr.splitlines() if not line.startswith("import time:")]
    assert done.returncode == 2 and len(lines) == 1 and message in lines[0], done.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert not {"torch", "lightning", "torchrl"} & imported


def test_mate_in_one_positions_have_mating_moves():
    positions = mate_in_one_positions(8, seed=7)
    assert len(positions) == 8 and len({b.fen() for b, _ in positions}) == 8
    for board, mates in positions:
        legal = set(board.legal_actions())
        for action in legal:
            child = board.copy()
            child.push_action(action)
            assert child.is_checkmate() == (action in mates)
    assert positions[0][0].fen() == mate_in_one_positions(1, seed=7)[0][0].fen()  # fixed seed, same set


def test_chess_benchmark_metrics_of_a_tiny_network():
    torch.manual_seed(0)
    net = AZResNet(tuple(PLANES_SHAPE), NUM_ACTIONS, channels=8, blocks=1).eval()
    bench = ChessBenchmark(every_n_iterations=1, agent_simulations=4, mcts_games=2, mcts_opponent_simulations=8,
                           opening_moves=2, mate_positions=6)  # fmt: skip
    bench._datamodule = SeedStreams()  # the run's datamodule: its seed streams are checkpointed
    bench._datamodule.seeds = PhaseSeeds(1, 0)
    bench.mates = mate_in_one_positions(bench.mate_positions, bench.mate_seed)
    metrics = bench.evaluate(net, torch.device("cpu"))
    for key in ("eval/win_rate_vs_mcts", "eval/draw_rate_vs_mcts", "eval/mate_in_one/policy",
                "eval/mate_in_one/mcts", "eval/mate_in_one/random"):
        assert 0.0 <= metrics[key] <= 1.0, (key, metrics)
    assert metrics["eval/game_length_vs_mcts"] > 0
    assert 0 < metrics["eval/mate_in_one/random"] < 1  # a mating move among several legal ones
    # the policy share is the share of positions whose top legal logit is a mate
    policy_share = metrics["eval/mate_in_one/policy"] * len(bench.mates)
    assert np.isclose(policy_share, round(policy_share))


def test_cli_debug_tiny_runs_selfplay_training_gate_and_evaluation(tmp_path):
    done = train(tmp_path, "+experiment=chess_alphazero", "debug=tiny", "tracking=none", "seed=3")
    assert done.returncode == 0, done.stderr[-3000:]
    (run_dir,) = (tmp_path / "outputs" / "runs").iterdir()
    record = json.loads((run_dir / "phase0" / "done.json").read_text())
    metrics = record["metrics"]
    for key in ("loss/total", "loss/policy", "loss/value", "selfplay/positions_per_s", "selfplay/fill_ratio",
                "selfplay/mean_game_length", "gate/score", "gate/generation", "eval/win_rate_vs_mcts",
                "eval/draw_rate_vs_mcts", "eval/mate_in_one/policy", "eval/mate_in_one/mcts"):
        assert key in metrics, sorted(metrics)
    assert metrics["selfplay/games"] == 4  # 2 iterations x 2 games (debug sizes)
    # whole games, and no mirrored copies: the buffer holds exactly the positions played
    assert metrics["selfplay/replay_size"] == metrics["selfplay/positions"]
    assert metrics["selfplay/mean_game_length"] > 10
    assert not any(key.startswith("eval/generated") for key in metrics)  # Connect Four's benchmark is off
    assert (run_dir / "phase0" / "checkpoints" / "latest.pt").exists()
