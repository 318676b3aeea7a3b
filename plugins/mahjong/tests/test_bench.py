"""``python -m meeple.bench mahjong`` comes from this plugin's entry point (``meeple.benchmarks``)
and writes every number it prints (tiny sizes; timings are never asserted)."""

from __future__ import annotations

import json
import re
import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path

import meeple.plugins.registry as registry
from meeple.bench.__main__ import main as bench_main
from meeple_mahjong import bench

PYPROJECT = Path(__file__).parents[1] / "pyproject.toml"


def declared() -> list[EntryPoint]:
    """The plugin's ``meeple.benchmarks`` entry points as its pyproject declares them."""
    table = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"][registry.BENCHMARKS_GROUP]
    return [EntryPoint(name, value, registry.BENCHMARKS_GROUP) for name, value in table.items()]


def test_entry_point_names_the_benchmark_main():
    (ep,) = [ep for ep in declared() if ep.name == "mahjong"]
    assert ep.load() is bench.main


def test_mahjong_bench_runs_through_the_core_cli(tmp_path, monkeypatch, capsys):
    real = registry.entry_points
    monkeypatch.setattr(registry, "entry_points", lambda group: declared()
                        if group == registry.BENCHMARKS_GROUP else real(group=group))  # fmt: skip
    assert bench_main([]) == 0
    assert re.search(r"\n  mahjong +riichi mahjong engine: games/hour", capsys.readouterr().out)
    out = tmp_path / "mahjong.json"
    code = bench_main(["mahjong", "--out", str(out), "--games", "1", "--native-games", "2",
                       "--bot-games", "1", "--hands", "1", "--batch-decisions", "20",
                       "--corpus-games", "1"])  # fmt: skip
    assert code == 0
    result = json.loads(out.read_text())
    assert result["benchmark"] == "mahjong"
    res = result["results"]
    assert res["meeple"]["ok"] and res["meeple"]["games"] == 1 and res["meeple"]["decisions"] > 0
    assert res["meeple-native"]["games"] == 2 and res["meeple-rule-bots"]["games"] == 1
    assert all(res[f"meeple-batch-B{b}"]["decisions"] >= 20 for b in bench.BATCH_SIZES)
    assert res["meeple-encoder"]["meeple_public_native_obs_per_s"] > 0
    corpus = res["meeple-corpus"]
    assert corpus["games"] == 1 and corpus["samples"] > 0 and corpus["shards_samples_per_s"] > 0
    assert "corpus shards samples_per_s / 200k goal" in result["ratios"]
    for peer in ("pymahjong", "riichienv", "pymahjong-with-obs"):
        assert res[peer]["ok"] or "does not import" in res[peer]["missing"]
    printed = capsys.readouterr().out
    assert all(name in printed for name in res) and f"wrote {out}" in printed
