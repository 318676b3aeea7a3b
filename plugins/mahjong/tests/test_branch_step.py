"""python -m meeple_mahjong.branch_step: one large step on a batch of the start's branched
decisions, priced on tables that never trained, written as a checkpoint duplicate can seat."""

import json

import pytest
import torch

from meeple_mahjong import branch_noise as bn
from meeple_mahjong import branch_step as bs
from meeple_mahjong.policy import load_policy_actor


def _decisions(gate):
    actor, _ = load_policy_actor(gate)
    return actor, bn.branched_decisions(actor, {"candidates": 4, "tables": 64}, tables=8, steps=60, seed=3)


def test_the_held_out_tables_share_no_wall_with_the_training_ones(mahjong_runs):
    _, batch = _decisions(mahjong_runs["phase2"] / "gates" / "phase1.pt")
    train, test = bs.split_by_table(batch, 0.25, seed=0)
    assert len(train) + len(test) == len(batch) and len(test) > 0
    assert set(train["slot"].tolist()).isdisjoint(test["slot"].tolist()) and len(set(test["slot"].tolist())) == 2


def test_a_step_and_the_gradients_line_learn_a_value_that_holds_on_other_tables(mahjong_runs):
    actor, batch = _decisions(mahjong_runs["phase2"] / "gates" / "phase1.pt")
    start = {k: v.clone() for k, v in actor.state_dict().items()}
    # The start's least likely candidate is worth a win (1.0), the others nothing: a rule of the
    # state that holds on any table, so the held-out tables must see the step's gain.
    prior = batch["branch_prior"].masked_fill(~batch["branch_mask"], 2.0)
    batch["branch_value"] = torch.zeros_like(prior).scatter(-1, prior.argmin(-1, keepdim=True), 1.0)
    train, test = bs.split_by_table(batch, 0.25, seed=0)
    rows = bs.improve(actor, train, test, updates=6, lr=3e-3, kl_coef=0.0, clip=0.2)
    assert [r["update"] for r in rows] == list(range(7)) and abs(rows[0]["gain"]) < 1e-6 and rows[0]["kl"] < 1e-9
    assert rows[-1]["gain"] > 3 * rows[-1]["gain_se"] > 0 and rows[-1]["kl"] > 0

    actor.load_state_dict(start)
    # the line along the signal's gradient gains on both sides, and leaves the actor as it was
    line = bs.line_search(actor, train, test, [0.3, 1.0], clip=0.2)
    assert [r["length"] for r in line] == [0, 0.3, 1.0] and line[-1]["train_gain"] > 0 and line[-1]["gain"] > 0
    assert all(torch.equal(v, start[k]) for k, v in actor.state_dict().items())


def test_the_command_writes_a_seatable_checkpoint_and_reuses_its_decisions(mahjong_runs, tmp_path, capsys, monkeypatch):
    gate = mahjong_runs["phase2"] / "gates" / "phase1.pt"
    out, summary, kept = tmp_path / "step.pt", tmp_path / "step.json", tmp_path / "decisions.pt"
    args = ["--policy", str(gate), "--tables", "8", "--steps", "40", "--updates", "2", "--lr", "1e-3",
            "--seed", "4", "--decisions", str(kept), "--summary", str(summary)]  # fmt: skip
    assert bs.main([*args, "--out", str(out)]) == 0, capsys.readouterr().err
    s = json.loads(summary.read_text())
    assert [r["update"] for r in s["curve"]] == [0, 1, 2] and s["train"] > 0 and s["held_out"] > 0
    assert "held-out gain" in capsys.readouterr().out
    new, info = load_policy_actor(out)
    old, _ = load_policy_actor(gate)
    assert any(not torch.equal(a, b) for a, b in zip(new.state_dict().values(), old.state_dict().values(), strict=True))

    # the same settings read the kept decisions instead of playing again: the same step
    played = bn.branched_decisions
    monkeypatch.setattr(bn, "branched_decisions", lambda *a, **k: (_ for _ in ()).throw(AssertionError("played")))
    assert bs.main([*args, "--out", str(tmp_path / "again.pt")]) == 0, capsys.readouterr().err
    again, _ = load_policy_actor(tmp_path / "again.pt")
    assert all(torch.equal(a, b) for a, b in zip(new.state_dict().values(), again.state_dict().values(), strict=True))
    # other settings (another seed) play again, saying why
    monkeypatch.setattr(bn, "branched_decisions", played)
    assert bs.main([*args[:-4], "--seed", "5", "--decisions", str(kept), "--out", str(tmp_path / "other.pt")]) == 0
    assert "holds decisions of other settings" in capsys.readouterr().err
    # --line prices the gradient's line and writes no checkpoint
    assert bs.main([*args[:-2], "--line", "0.01", "0.1", "--summary", str(summary)]) == 0
    line = json.loads(summary.read_text())["line"]
    assert [r["length"] for r in line] == [0, 0.01, 0.1] and line[-1]["kl"] > 0 and "length 0.1:" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        bs.main(["--policy", str(gate), "--out", str(out), "--clip", "1.5"])
    assert exit_.value.code == 2 and "--clip" in capsys.readouterr().err
