"""``python -m meeple_connect4.strength`` on a real (tiny) AlphaZero run: the same benchmark
numbers the training callback logged for the same network, a match count that adds up, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from meeple.cli.train import train
from meeple.config.compose import compose_config
from meeple_connect4.strength import main

TINY = ["+experiment=connect4_alphazero", "debug=tiny", "tracking=none", "callbacks.progress=null",
        "phase.callbacks.curves=null", "phase.eval.mcts_positions=200", "phase.eval.agent_simulations=4"]


def test_strength_of_a_run_matches_its_benchmark_and_counts_games(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # outputs/ and mlflow.db land there
    logged = train(compose_config(TINY))
    (run,) = Path("outputs/runs").iterdir()
    out = tmp_path / "strength.json"
    # the benchmark callback's players keep 8 leaves in flight
    assert main([str(run), "--agent-simulations", "4", "--mcts-rollouts", "20", "--games", "2",
                 "--leaves-in-flight", "8", "--json", str(out)]) == 0  # fmt: skip
    metrics = json.loads(out.read_text())
    for name in ("generated_middle", "generated_end"):
        for kind in ("optimal_policy", "correct_policy", "optimal_mcts", "optimal_random"):
            assert metrics[f"{name}/{kind}"] == pytest.approx(logged[f"eval/{name}/{kind}"]), (name, kind)
    games = [metrics[f"vs_mcts20_first/{k}"] for k in ("wins", "draws", "losses")]
    assert sum(games) == 2
    assert "generated_middle/optimal_policy" in capsys.readouterr().out


def test_bad_arguments_are_one_line_errors(tmp_path, capsys):
    assert main([str(tmp_path / "missing"), "--games", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("meeple: error: ") and "missing" in err and err.count("\n") == 1
    assert main([str(tmp_path), "--mcts-rollouts", "0"]) == 2
    assert "--mcts-rollouts must be >= 1, got 0" in capsys.readouterr().err
