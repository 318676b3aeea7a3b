"""meeple_mahjong.belief_probe: how well a public deal-in belief ranks the discards that deal in,
and what shifting the reference's discards by it (or by the oracle's labels) does, on the tiny
phase-2 run's phase-1 gate (its BC auxiliary danger head)."""

import json

import pytest
import torch

from meeple_mahjong import belief_probe


@pytest.fixture(scope="module")
def gates(mahjong_runs):
    g = mahjong_runs["phase2"] / "gates"
    return {name: g / f"{name}.pt" for name in ("phase1", "teacher")}


def test_auc_is_the_chance_a_positive_outscores_a_negative():
    torch.manual_seed(0)
    scores = torch.randint(0, 5, (60,)).float()  # many ties
    labels = torch.rand(60) < 0.4
    pos, neg = scores[labels], scores[~labels]
    brute = ((pos[:, None] > neg[None, :]).float() + 0.5 * (pos[:, None] == neg[None, :]).float()).mean()
    assert belief_probe.auc(scores, labels) == pytest.approx(float(brute))
    assert belief_probe.auc(labels.float(), labels) == 1.0
    assert belief_probe.auc(scores, torch.zeros(60, dtype=torch.bool)) != belief_probe.auc(scores, labels)  # nan


def test_the_probe_reads_the_bc_belief_and_prices_the_shifts(gates, tmp_path, capsys):
    out, png = tmp_path / "b.json", tmp_path / "b.png"
    argv = ["--belief", str(gates["phase1"]), "--tables", "8", "--steps", "60", "--seed", "3",
            "--out", str(out), "--plot", str(png)]  # fmt: skip
    assert belief_probe.main(argv) == 0
    r = json.loads(out.read_text())
    assert r["source"] == "BC auxiliary aux_danger" and r["decisions"] == 480 and r["choices"] > 0
    for key in ("auc_all", "auc_choices", "auc_within"):
        assert 0 <= r[key] <= 1
    for name in ("public", "oracle"):
        rows = r["curves"][name]
        assert rows[0]["w"] == 0 and rows[0]["kl_to_reference"] == pytest.approx(0, abs=1e-6)
        masses = [row["dealing_mass"] for row in rows]
        assert masses[0] == r["curves"]["public"][0]["dealing_mass"]  # both start at the reference
        assert all(b <= a + 1e-9 for a, b in zip(masses, masses[1:], strict=False))  # a shift away only lowers it
    assert r["curves"]["oracle"][-1]["dealing_mass"] < 0.5 * r["curves"]["oracle"][0]["dealing_mass"]
    assert png.stat().st_size > 0 and "within a decision" in capsys.readouterr().out
    # the teacher's gate has neither a danger head nor BC's auxiliary heads: one line
    assert belief_probe.main(["--belief", str(gates["teacher"]), "--steps", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("meeple: error:") and "no belief to probe" in err and err.count("\n") == 1
