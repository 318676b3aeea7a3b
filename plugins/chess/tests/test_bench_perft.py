"""The chess benchmark runs end to end and writes every number it prints (tiny sizes)."""

import json

import pytest

from meeple.bench.__main__ import main

pytest.importorskip("meeple_native.chess")


def test_chess_bench_writes_results(tmp_path):
    out = tmp_path / "chess.json"
    code = main(["chess", "--out", str(out), "--depth-offset", "-3", "--selfplay-games", "1",
                 "--simulations", "4", "--network-seconds", "1"])
    assert code == 0
    result = json.loads(out.read_text())
    meeple = result["perft"]["meeple"]
    assert meeple["ok"] and set(meeple["positions"]) == {
        "start", "kiwipete", "position3", "position4", "position5", "position6"}
    for peer in result["perft"].values():
        if peer["ok"]:
            assert all(row["matches_published"] for row in peer["positions"].values())
            assert peer["nodes"] == meeple["nodes"] and peer["nodes_per_s"] > 0
        else:
            assert "install" in peer["missing"]
    assert all(v > 0 for v in result["ratios"].values())
    assert result["selfplay_uniform"]["W1"]["positions"] > 0
    network = result["selfplay_network"]
    assert "missing" in network or (network["positions"] >= 0 and network["evaluations"] > 0)


def test_chess_bench_rejects_deeper_than_published(tmp_path):
    with pytest.raises(SystemExit):
        main(["chess", "--out", str(tmp_path / "x.json"), "--depth-offset", "1"])
