"""The pixels benchmark runs end to end (tiny sizes) and writes every section; no timing asserts."""

import json

import pytest

pytest.importorskip("warp")


def test_quick_pixels_bench_writes_all_sections(tmp_path):
    from meeple.bench.pixels import main

    out = tmp_path / "pixels.json"
    assert main(["--quick", "--device", "cpu", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert {"env", "unpack", "reward", "train", "memory"} <= set(report)
    assert report["env"]["warp"]["frames_per_s"] > 0 and report["env"]["torch"]["frames_per_s"] > 0
    for variant in ("lut_float32", "lut_uint8", "shift_uint8", "warp_lut_float32"):
        assert report["unpack"][variant]["ratio_vs_copy"] > 0
    assert report["memory"]["unpacked_float32_over_packed"] == 16.0
    assert (
        report["train"]["sync"]["frames_per_s"] > 0 and report["train"]["async"]["frames_per_s"] > 0
    )


def test_learn_row_runs(tmp_path):
    """The learn row (on by default on a GPU) wired as main calls it: one rollout on the CPU."""
    from meeple.bench.pixels import main

    out = tmp_path / "pixels.json"
    assert main(["--quick", "--learn", "--only", "learn", "--device", "cpu", "--envs", "8", "--out", str(out)]) == 0
    learn = json.loads(out.read_text())["learn"]
    assert learn["sync"]["frames"] > 0 and learn["async"]["frames"] > 0
