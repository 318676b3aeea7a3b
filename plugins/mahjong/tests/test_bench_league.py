"""``python -m meeple.bench league`` (meeple_mahjong.bench_league): registered by this plugin's
entry point, every row over exactly the requested learner decisions, networks seated as the
rows say (tiny sizes; timings are never asserted)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
import torch

import meeple.plugins.registry as registry
from meeple_mahjong import bench_league

PYPROJECT = Path(__file__).parents[1] / "pyproject.toml"
ROWS = ("sim-rule-bots", "env-rule-bots", "league-self", "league-pool3")
KEYS = ("decisions", "decisions_per_s", "decisions_per_s_wall", "all_decisions", "all_decisions_per_s",
        "games", "games_per_hour", "games_per_hour_wall", "cpu_s", "wall_s", "steps")  # fmt: skip


def test_entry_point_names_the_league_benchmark():
    declared = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"]
    assert declared[registry.BENCHMARKS_GROUP]["league"] == "meeple_mahjong.bench_league:main"


def test_league_bench_writes_every_row_over_the_requested_decisions(tmp_path, capsys):
    out = tmp_path / "league.json"
    threads = torch.get_num_threads()
    torch.set_num_threads(threads + 1)  # the caller's setting, restored after the bench's 1 thread
    try:
        code = bench_league.main(["--out", str(out), "--tables", "2", "--decisions", "64", "--blocks",
                                  "1", "--channels", "8", "--threads", "1"])  # fmt: skip
        assert code == 0 and torch.get_num_threads() == threads + 1
    finally:
        torch.set_num_threads(threads)
    result = json.loads(out.read_text())
    network = result["config"]["network"]  # groups and hidden: the small scale's
    assert result["benchmark"] == "league" and network["blocks"] == 1 and network["channels"] == 8
    assert set(network) == {"blocks", "channels", "groups", "hidden"}
    res = result["results"]
    assert list(res) == list(ROWS)
    for name, row in res.items():
        assert row["ok"], name
        assert all(k in row for k in KEYS), (name, set(KEYS) - set(row))
        # One learner slot per table, each with a decision at every step: 32 steps of 2.
        assert row["decisions"] == 64 and row["steps"] == 32, name
        assert row["all_decisions"] > row["decisions"], name  # the other seats decided too
    assert res["env-rule-bots"]["forwards_per_step"] == 0
    assert list(res["league-self"]["network_forwards"]) == ["net0"]
    pool = res["league-pool3"]["network_forwards"]
    assert sorted(pool) == ["net0", "net1", "net2"] and all(n > 0 for n in pool.values())
    for name in ("league-self", "league-pool3"):
        # The learner's forward each step plus at least one of a seated network.
        assert res[name]["forwards_per_step"] > 1 and res[name]["parameters"] > 0
        assert f"{name}/sim-rule-bots decisions_per_s" in result["ratios"]
    printed = capsys.readouterr().out
    assert all(name in printed for name in ROWS) and f"wrote {out}" in printed


def test_pool_zero_leaves_the_pool_row_out_and_bad_channels_are_refused(tmp_path, capsys):
    out = tmp_path / "league.json"
    with pytest.raises(SystemExit) as err:
        bench_league.main(["--out", str(out), "--channels", "12"])
    assert err.value.code == 2 and "a multiple of 8" in capsys.readouterr().err and not out.exists()
    assert bench_league.main(["--out", str(out), "--tables", "1", "--decisions", "4", "--blocks", "1",
                              "--channels", "8", "--pool", "0", "--learner", "greedy"]) == 0  # fmt: skip
    assert "league-pool" not in " ".join(json.loads(out.read_text())["results"])
