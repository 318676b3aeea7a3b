"""meeple_mahjong.distill_targets: what each oracle stage's teacher and a student put on the discards
that deal in, and their KL to phase 1 and to the full-sighted teacher, on one set of decisions (the
tiny phase-2 run's gates)."""

import json

import pytest
import torch

from meeple_mahjong import distill_targets
from meeple_mahjong.policy import load_policy_heads
from meeple_mahjong.safety import avoidable, dealing_actions, discard_kinds


@pytest.fixture(scope="module")
def gates(mahjong_runs):
    g = mahjong_runs["phase2"] / "gates"
    return {name: g / f"{name}.pt" for name in ("phase1", "teacher", "student")}


def test_the_rows_measure_the_teacher_under_each_stage_and_the_policies_on_the_same_decisions(gates):
    batch = distill_targets.decisions(gates["phase1"], tables=8, steps=60, seed=3)
    assert batch["observation"].shape[0] == 480 and batch["oracle"].shape[:2] == (480, 205)
    stages = [(1.0, 1.0), (0.0, 0.0)]
    out = distill_targets.measure(gates["teacher"], gates["phase1"], {"student": gates["student"]}, batch, stages)
    rows = out["rows"]
    assert list(rows) == ["reference", "teacher keep 1/1", "teacher keep 0/0", "student"]
    assert rows["reference"]["kl_to_reference"] == pytest.approx(0, abs=1e-6)
    assert rows["teacher keep 1/1"]["kl_to_teacher"] == pytest.approx(0, abs=1e-6)
    # keep 0/0 is the teacher with every oracle plane zeroed, measured independently here
    mask = batch["action_mask"].bool()
    dealing = dealing_actions(batch["oracle"], mask, discard_kinds())
    chosen = avoidable(dealing, mask).any(-1)
    assert out["choices"] == int(chosen.sum()) > 0
    teacher, _ = load_policy_heads(gates["teacher"])
    blind = teacher(batch["observation"], mask, torch.zeros_like(batch["oracle"]))[0]
    assert rows["teacher keep 0/0"]["dealing_mass"] == pytest.approx(float((blind * dealing).sum(-1)[chosen].mean()))
    for row in rows.values():
        assert 0 <= row["dealing_mass"] <= 1 and row["kl_to_reference"] >= -1e-6


def test_the_command_writes_its_table_and_refuses_bad_input_in_one_line(gates, tmp_path, capsys):
    out = tmp_path / "targets.json"
    rc = distill_targets.main(["--teacher", str(gates["teacher"]), "--reference", str(gates["phase1"]),
                               "--policy", f"student={gates['student']}", "--tables", "8", "--steps", "40",
                               "--opponents", "reference", "--out", str(out)])  # fmt: skip
    assert rc == 0
    saved = json.loads(out.read_text())
    assert saved["opponents"] == "reference" and saved["decisions"] == 320
    assert set(saved["rows"]) == {"reference", "student", "teacher keep 1/1", "teacher keep 0.7/0.5",
                                  "teacher keep 0.3/0.2", "teacher keep 0/0"}  # fmt: skip
    assert "teacher keep 0.7/0.5" in capsys.readouterr().out
    # phase 1 reads no oracle planes: it cannot be the teacher
    rc = distill_targets.main(["--teacher", str(gates["phase1"]), "--reference", str(gates["phase1"]),
                               "--tables", "8", "--steps", "40"])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "does not read the oracle planes" in err[0]
    with pytest.raises(SystemExit) as exit_:
        distill_targets.main(["--teacher", "t.pt", "--reference", "r.pt", "--policy", "nameonly"])
    assert exit_.value.code == 2
    assert "accepted: NAME=CHECKPOINT" in capsys.readouterr().err


def test_parts_put_groups_of_the_teachers_weights_back_to_the_references(gates):
    """--parts: with all but its oracle stem put back and the oracle planes zero, the teacher is
    the reference again; its own weights are left as they were."""
    batch = distill_targets.decisions(gates["phase1"], tables=8, steps=30, seed=4)
    obs, mask, oracle = batch["observation"], batch["action_mask"].bool(), batch["oracle"]
    teacher, _ = load_policy_heads(gates["teacher"])
    reference, _ = load_policy_heads(gates["phase1"])
    before = {k: v.clone() for k, v in teacher.actor.state_dict().items()}
    back = distill_targets.reset_parts(teacher, reference, distill_targets.PART_RESETS[
        "teacher, all but the oracle stem = reference's"])
    blind = torch.zeros_like(oracle)
    torch.testing.assert_close(back(obs, mask, blind)[0], reference(obs, mask)[0])
    assert not torch.allclose(teacher(obs, mask, blind)[0], reference(obs, mask)[0], atol=1e-4)  # it trained
    assert all(torch.equal(v, teacher.actor.state_dict()[k]) for k, v in before.items())
    out = distill_targets.measure(gates["teacher"], gates["phase1"], {}, batch, [(1.0, 1.0)], parts=True)
    assert set(distill_targets.PART_RESETS) < set(out["rows"])
