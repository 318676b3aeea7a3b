"""python -m meeple_mahjong.branch_noise: a policy's branched decisions, and how well the branch
term's gradient on two disjoint halves of them agrees at each size; a filter that no decision
meets fails in one line."""

import json

import torch

from meeple_mahjong import branch_noise as bn
from meeple_mahjong.policy import load_policy_actor


def test_the_command_measures_the_agreement_of_halves(mahjong_runs, tmp_path, capsys):
    gate = mahjong_runs["phase2"] / "gates" / "phase1.pt"
    out = tmp_path / "noise.json"
    assert bn.main(["--policy", str(gate), "--tables", "8", "--steps", "40", "--sizes", "8", "32",
                    "--repeats", "3", "--out", str(out)]) == 0, capsys.readouterr().err  # fmt: skip
    s = json.loads(out.read_text())
    # most of the 320 decisions offer a choice whatever the tiny gate learned; 64 are enough for two halves of 32
    assert s["decisions"] >= 64 and [r["n"] for r in s["sizes"]] == [8, 32]
    assert all(-1 <= r["cos"] <= 1 and r["cos_sd"] >= 0 for r in s["sizes"])
    assert "halves of" in capsys.readouterr().out
    assert bn.main(["--policy", str(gate), "--tables", "2", "--steps", "1", "--kinds", "other"]) == 2
    assert "no decision was branched" in capsys.readouterr().err


def test_the_gradient_reaches_the_weights_and_ties_carry_none(mahjong_runs):
    actor, _ = load_policy_actor(mahjong_runs["phase2"] / "gates" / "phase1.pt")
    # 300 steps of 2 tables play past the end of a game: its table starts the next one
    batch = bn.branched_decisions(actor, {"candidates": 4, "tables": 64}, tables=2, steps=300, seed=1)
    assert len(batch) >= 8 and (batch["branch_mask"].sum(-1) >= 2).all()
    torch.rand(3)  # whatever the caller's RNG did before: the seed alone decides the decisions played
    again = bn.branched_decisions(actor, {"candidates": 4, "tables": 64, "redeals": 2}, tables=2, steps=300, seed=1)
    assert torch.equal(again["observation"], batch["observation"]) and torch.equal(again["slot"], batch["slot"])
    every = torch.arange(len(batch))
    signal = bn.branch_gradient(actor, batch, 0.1)(every).norm()
    tied = batch.clone()
    tied["branch_value"] = torch.where(tied["branch_mask"], 0.25, 0.0)  # every candidate ends the hand alike
    assert signal > 0 and bn.branch_gradient(actor, tied, 0.1)(every).norm() < 1e-9 * signal
