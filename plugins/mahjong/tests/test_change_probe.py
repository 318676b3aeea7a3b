"""The change probe (meeple_mahjong.change_probe): where a policy's argmax differs from its
reference's, the reference's advantage of the policy's choice from two copies of the table. A
policy identical to its reference changes nothing; one that declines every win makes only "win"
changes, and the probe measures them as losses."""

import json

import pytest
import torch

from meeple_mahjong import change_probe as cp
from meeple_native import mahjong as mj

PASS = mj.PASS_ACTION  # the pass action's index

NA = mj.NUM_ACTIONS
WINS = torch.tensor(list(cp.ACTION_KINDS["win"]))


def efficient(obs, mask):
    """Masked logits of a deterministic policy that wins now and then: the plain discard that
    leaves the lowest shanten (ties: the lowest kind), a pass in claims windows, a legal tsumo or
    ron before anything else."""
    counts = obs[:, :4].sum(1).to(torch.int16)  # own hand planes 0-3: >= 1 .. >= 4 copies
    shanten = torch.zeros(len(obs), 34)
    turn = torch.nonzero(counts.sum(-1) % 3 == 2).squeeze(-1)  # own turn: a tile to discard
    if len(turn):
        held = counts[turn] > 0
        # a kind not held is "discarded" as the first held kind (a valid hand), then priced out
        kinds = torch.where(held, torch.arange(34), held.to(torch.int8).argmax(-1, keepdim=True))
        after = counts[turn].unsqueeze(1).expand(-1, 34, -1).clone()
        after.scatter_add_(2, kinds.unsqueeze(-1), -torch.ones_like(after[..., :1]))
        sh = mj.shanten_batch(after.reshape(-1, 34).to(torch.uint8).contiguous().numpy())[:, 0]
        shanten[turn] = torch.from_numpy(sh).view(-1, 34).float().masked_fill(~held, 99.0)
    logits = -1000.0 * torch.arange(NA, dtype=torch.float32).expand(len(obs), -1).clone()
    logits[:, :34] -= 1e5 * shanten
    logits[:, PASS] = 1e5
    logits[:, WINS] = 1e6
    return logits.masked_fill(~mask, float("-inf"))


def wins_first(obs, mask):
    return efficient(obs, mask)


def never_wins(obs, mask):
    """efficient with the wins taken out (while another action is legal: a pass or a discard)."""
    logits = efficient(obs, mask).clone()
    others = (mask & ~torch.isin(torch.arange(NA), WINS)).any(-1, keepdim=True)
    logits[:, WINS] = torch.where(others, float("-inf"), logits[:, WINS])
    return logits


def test_change_kinds():
    assert cp.change_kind(3, 20) == "discard"
    assert cp.change_kind(3, 37 + 3) == "riichi" and cp.change_kind(40, 50) == "riichi"
    assert cp.change_kind(80, PASS) == "call" and cp.change_kind(74, 80) == "call"
    assert cp.change_kind(152, PASS) == "win" and cp.change_kind(5, 151) == "win"
    assert cp.change_kind(154, 5) == "other"
    # every action index has exactly one kind
    assert sorted(i for r in cp.ACTION_KINDS.values() for i in r) == list(range(NA))


def declines_wins_under_riichi(obs, mask):
    """never_wins while an opponent has a riichi declaration tile (seat plane 8, not the riichi
    flag the probe reads), wins_first otherwise."""
    threat = torch.stack([obs[:, 8 + 14 * i + 8].sum(-1) > 0 for i in (1, 2, 3)], -1).any(-1, keepdim=True)
    return torch.where(threat, never_wins(obs, mask), wins_first(obs, mask))


def test_a_policy_that_is_its_reference_changes_nothing():
    s = cp.probe(wins_first, wins_first, tables=8, decisions=600, seed=3)
    assert s["decisions"] >= 600 and s["hands"] > 0
    assert s["changes"] == 0 and s["change_rate"] == 0 and s["delta"]["n"] == 0 and s["branches"] == 0


def test_declining_wins_is_measured_as_a_loss():
    s = cp.probe(never_wins, wins_first, tables=16, decisions=8000, seed=4)
    wins = s["by_kind"]["win"]
    assert s["changes"] == wins["n"] >= 20 and wins["share"] == 1.0  # every change is a declined win
    # a declined win is worth a hand's win less (the copies that won scored >= 1,000 points)
    assert wins["mean"] < -0.1 and wins["ci95"][1] < 0 and s["points_per_hand"] < 0, wins
    assert s["branches"] == 2 * s["changes"] and s["truncated"] == 0
    assert 0 < s["under_riichi"]["n"] < s["changes"]  # some of the wins it declined came under a riichi


def test_the_changes_under_an_opponents_riichi_are_counted_apart():
    s = cp.probe(declines_wins_under_riichi, wins_first, tables=16, decisions=8000, seed=4)
    under = s["under_riichi"]
    assert s["changes"] == under["n"] >= 5 and under["share"] == 1.0, under
    assert under["mean"] < 0


def test_the_command_measures_two_checkpoints_and_refuses_a_bad_one(mahjong_runs, tmp_path, capsys):
    gates = mahjong_runs["phase2"] / "gates"
    out = tmp_path / "probe.json"
    argv = ["--policy", str(gates / "student.pt"), "--reference", str(gates / "phase1.pt"),
            "--tables", "8", "--decisions", "300", "--seed", "5", "--out", str(out)]  # fmt: skip
    assert cp.main(argv) == 0
    s = json.loads(out.read_text())
    assert s["decisions"] >= 300 and s["changes"] == sum(v["n"] for v in s["by_kind"].values())
    assert "changes:" in capsys.readouterr().out
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    assert cp.main(["--policy", str(bad), "--reference", str(gates / "phase1.pt")]) == 2
    assert capsys.readouterr().err.startswith("meeple: error:")
    with pytest.raises(SystemExit):
        cp.main(["--policy", str(bad), "--reference", str(bad), "--decisions", "0"])
