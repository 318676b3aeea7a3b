"""The chess self-play benchmark (entry point ``meeple.benchmarks: chess_selfplay``) on a tiny setting."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from meeple_chess.bench import main


def test_benchmark_is_declared():
    table = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert table["project"]["entry-points"]["meeple.benchmarks"] == {
        "chess_selfplay": "meeple_chess.bench:main", "chess": "meeple_chess.bench_perft:main"}


def test_selfplay_benchmark_reports_speed_and_fill(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert main(["--seconds", "1.5", "--out", str(out), "model.channels=8", "model.blocks=1",
                 "phase.selfplay.num_workers=1", "phase.selfplay.games_per_worker=4",
                 "phase.selfplay.batch_size=8", "phase.selfplay.num_simulations=8"]) == 0  # fmt: skip
    row = json.loads(out.read_text())
    assert row["selfplay"]["num_simulations"] == 8 and row["selfplay"]["dirichlet_alpha"] == 0.3
    assert "'channels': 8" in row["network"] and row["torch_threads"] == 1  # the cpu profile's
    assert row["positions"] > 0 and row["positions_per_s"] > 0 and row["evaluations"] > 0
    assert 0 < row["mean_fill_ratio"] <= 1 and 0 <= row["evaluator_idle_fraction"] <= 1
    assert 1.0 < row["wall_s"] < 10  # stopped by the timer
    assert "positions/s" in capsys.readouterr().out
