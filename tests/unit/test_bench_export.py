"""``python -m meeple.bench export`` runs end to end on fresh networks (timings are printed,
never asserted); ~8 s: two dynamo exports."""

from __future__ import annotations

import json

from meeple.bench.__main__ import main as bench_main


def test_export_bench_rows(tmp_path, capsys):
    out = tmp_path / "export.json"
    assert bench_main(["export", "--calls", "64", "--repeats", "1", "--warmup", "1", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    rows = {(r["policy"], r["batch"]): r for r in result["rows"]}
    assert sorted(rows) == [("mlp 4", 1), ("mlp 4", 64), ("planes_resnet 84x34", 1), ("planes_resnet 84x34", 64)]
    assert rows["planes_resnet 84x34", 1]["observation"] == [84, 34]
    assert rows["planes_resnet 84x34", 1]["actions"] == 155 and rows["mlp 4", 1]["actions"] == 2
    for r in rows.values():
        assert r["parity_max_abs_logits"] <= 1e-4 and r["torch_us_per_decision"] > 0 < r["onnx_us_per_decision"]
        assert r["torch_us_per_call"] / r["batch"] == r["torch_us_per_decision"]
    assert result["threads"] == 1
    assert "ratio = torch / onnxruntime" in capsys.readouterr().out
