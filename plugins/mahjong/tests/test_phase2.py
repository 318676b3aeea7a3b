"""`python train.py +experiment=phase2 debug=tiny`: the oracle teacher starts as the phase-1
student, trains with the oracle planes, is measured against copies of its start, and the student
is distilled from it through every oracle stage into the final stretch."""

import json

import pytest
import torch

from meeple.checkpoint.callback import load_gate
from meeple.checkpoint.io import load_verified
from meeple_mahjong import duplicate as dup
from meeple_mahjong.distill_targets import decisions
from meeple_mahjong.policy import blind_policy, greedy_policy, load_policy_actor, load_policy_heads
from meeple_mahjong.specs import is_oracle

STEM = "stem.0.weight"


def _stem(state: dict, prefix: str = "actor.", suffix: str = STEM):
    (key,) = [k for k in state if k.startswith(prefix) and k.endswith(suffix)]
    return state[key]


@pytest.fixture(scope="module")
def pipeline_run(mahjong_runs):
    return mahjong_runs["phase2"]


def test_teacher_starts_as_the_student_and_reads_the_oracle_planes(pipeline_run):
    student = load_gate(pipeline_run / "gates" / "phase1.pt")
    teacher = load_gate(pipeline_run / "gates" / "teacher.pt")
    public, stem = _stem(student["model_state_dict"]), _stem(teacher["model_state_dict"])
    oracle = _stem(teacher["model_state_dict"], suffix="oracle_stem.weight")
    assert public.shape[1] == stem.shape[1] == 84 and oracle.shape[1] == 205
    # the gate against copies of the start policy, with the paired test's numbers
    for key in ("eval/vs_start_avg_rank", "eval/vs_start_p_value", "eval/vs_start_effect", "eval/avg_rank"):
        assert key in teacher["metrics"], key
    record = json.loads((pipeline_run / "phase1" / "gate.json").read_text())
    assert record["passed"] and record["next_stage"] == "phase 2 (student)"


def test_student_walks_every_oracle_stage_into_the_final_stretch(pipeline_run):
    latest = load_verified(pipeline_run / "phase2" / "checkpoints" / "latest.pt")
    schedule = latest["distill_schedule"]
    assert schedule["final"] and schedule["stage"] == 4
    metrics = latest["metrics"]
    assert metrics["distill/oracle_stage"] == 4 and metrics["distill/keep_wall"] == 0.0
    assert metrics["distill/kl_coef"] == pytest.approx(0.3) and 0 < metrics["distill/is_weight"] <= 1.0
    assert metrics["loss/teacher_kl"] >= 0
    state = latest["model_state_dict"]
    assert _stem(state).shape[1] == 84  # the student reads the public planes only
    teacher = load_gate(pipeline_run / "gates" / "teacher.pt")["model_state_dict"]
    assert (_stem(state, "teacher.") == _stem(teacher)).all()  # frozen


def test_rl_teacher_recipe_trains_the_new_weights_at_their_own_rate(pipeline_run, tiny_train, tmp_path):
    """+experiment=phase2_rl: no safety rule, a tile head, and the oracle stem and tile head (both
    starting at zero) at 10x the body's learning rate."""
    tiny_train(tmp_path, "+experiment=phase2_rl", "pipeline.stop=teacher", f"pipeline.source={pipeline_run}")
    (run,) = (tmp_path / "outputs" / "runs").iterdir()
    state = load_gate(run / "gates" / "teacher.pt")["model_state_dict"]
    assert _stem(state, suffix="oracle_stem.weight").abs().sum() > 0  # moved from its zero start
    assert any(".addend." in k for k in state)  # the tile head
    latest = load_verified(run / "phase1" / "checkpoints" / "latest.pt")
    assert latest["config"]["model"]["oracle_safety"] is False and latest["config"]["model"]["tile_head"]
    phase = latest["config"]["phase"]  # a constant rate and a held KL anchor
    assert phase["anneal_lr"] is False and phase["reference_kl"] == {"coef": 0.2, "anneal_fraction": None}
    body, new = latest["optimizer_state_dict"]["param_groups"]  # constant rates
    assert body["lr"] == pytest.approx(1e-4) and new["lr"] == pytest.approx(1e-3)
    assert len(new["params"]) == 3  # the oracle stem's weight, the tile head's weight and bias


def test_a_blind_teacher_plays_from_the_public_planes_alone(pipeline_run, tmp_path, capsys):
    """duplicate --blind-challenger: the teacher shown all-zero oracle planes, a public player whose
    actions are the teacher's on zero planes; a network without the oracle planes is refused."""
    gates = pipeline_run / "gates"
    teacher, _ = load_policy_actor(gates / "teacher.pt")
    blind = blind_policy(greedy_policy(teacher))
    assert not is_oracle(blind)  # a table of it computes no oracle planes
    batch = decisions(gates / "phase1.pt", tables=4, steps=30, seed=5)
    obs, mask = batch["observation"], batch["action_mask"].bool()
    heads, _ = load_policy_heads(gates / "teacher.pt")
    probs = heads(obs, mask, torch.zeros_like(batch["oracle"]))[0]
    assert torch.equal(blind(obs, mask), probs.argmax(-1))
    with pytest.raises(ValueError, match="needs an oracle policy"):
        blind_policy(greedy_policy(load_policy_actor(gates / "phase1.pt")[0]))

    out = tmp_path / "blind.json"
    argv = ["--challenger", str(gates / "teacher.pt"), "--blind-challenger", "--baseline", str(gates / "teacher.pt"),
            "--opponent", "rule", "--games", "2", "--out", str(out)]  # fmt: skip
    assert dup.main(argv) == 0
    s = json.loads(out.read_text())
    assert s["blind"] is True and "blind" not in s["baseline_policy"]
    assert dup.main(["--challenger", str(gates / "phase1.pt"), "--blind-challenger"]) == 2
    assert "reads no oracle planes" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        dup.main(["--challenger", "rule", "--blind-challenger"])
