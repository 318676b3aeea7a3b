"""`python train.py +experiment=phase2 debug=tiny`: the oracle teacher starts as the phase-1
student, trains with the oracle planes, is measured against copies of its start, and the student
is distilled from it through every oracle stage into the final stretch."""

import json

import pytest

from meeple.checkpoint.callback import load_gate
from meeple.checkpoint.io import load_verified

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
