"""``python -m meeple.bench transport`` runs every transport and reports the ratios the
issue's goals read (HTTP/socket, socket/shm p50, shm p99) and the K-server rows."""

import json

import pytest

from meeple.bench import transport as bench


def test_the_benchmark_reports_every_transport_and_its_ratios(tmp_path):
    out = tmp_path / "transport.json"
    argv = ["--out", str(out), "--sizes", "2", "--servers", "1", "--steps", "60", "--warmup", "5"]
    argv += ["--obs-size", "8", "--num-actions", "5"]
    assert bench.main(argv) == 0
    result = json.loads(out.read_text())
    assert [r["transport"] for r in result["latency"]] == ["http", "socket", "shm"]
    for row in result["latency"] + result["inproc"]:
        assert row["num_envs"] == 2
        assert 0 < row["p50_us"] <= row["p95_us"] <= row["p99_us"]
        assert row["env_steps_per_s"] == pytest.approx(2 * row["round_trips_per_s"])
        assert row["round_trips_per_s"] > 0
    ratios = result["ratios"]["N=2"]
    assert {"http_over_socket_p50", "socket_over_shm_p50", "shm_p99_us"} <= ratios.keys()
    http, socket, shm = (r["p50_us"] for r in result["latency"])
    assert ratios["http_over_socket_p50"] == pytest.approx(http / socket)
    assert {(r["transport"], r["servers"]) for r in result["servers"]} == {
        ("socket", 1),
        ("shm", 1),
    }
