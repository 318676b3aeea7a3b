"""Multi-stage runs through the real entry point: gates, transitions, resume, tracking.

A two-stage PPO -> PPO pipeline (fine-tuning from the first stage's gate) is composed from the
command line, so these tests do not depend on any recipe's phases.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest
import torch

from meeple.checkpoint.callback import load_gate
from meeple.checkpoint.io import load_verified
from meeple.checkpoint.retention import LATEST
from meeple.checkpoint.run_dir import find_latest_run
from meeple.cli.train import train
from meeple.errors import ConfigError, GateFailed, MeepleError
from meeple.tracking.mlflow import PARENT_RUN_TAG, store_uri
from meeple.tracking.uri import absolute_sqlite_uri
from tests.checkpoint.helpers import SimulatedCrash
from tests.checkpoint.test_resume import assert_same, histories, learning
from tests.conftest import REPO

# 2 stages x 3 rollouts of 32 frames (4 optimiser steps each), an evaluation every rollout.
TWO_STAGES = [
    "debug=tiny", "callbacks.progress=null", "++tracking.system_metrics=false", "seed=5",
    "+phase@pipeline.stages.a.phase=ppo", "+transition@pipeline.stages.a.transition=none",
    "+phase@pipeline.stages.b.phase=ppo", "+transition@pipeline.stages.b.transition=finetune",
    "+pipeline.order=[a,b]",
    # a pipeline composed on the command line names its stages' debug sizes (a recipe lists them)
    "+debug_sizes/phase@pipeline.stages.a=tiny/ppo", "+debug_sizes/phase@pipeline.stages.b=tiny/ppo",
    "pipeline.stages.a.phase.eval.every_n_rollouts=1", "pipeline.stages.b.phase.eval.every_n_rollouts=1",
    "pipeline.stages.a.phase.eval.episodes=4", "pipeline.stages.b.phase.eval.episodes=4",
]
GATE = 'pipeline.stages.b.transition.gate={metric: eval/episode_return, op: ">=", threshold: %s}'
CRASH_IN_B = ["+pipeline.stages.b.callbacks.crash._target_=tests.checkpoint.helpers.CrashAfterRollouts",
              "+pipeline.stages.b.callbacks.crash.rollouts=2"]


def run_of(task: str):
    return find_latest_run(Path("outputs/runs"), experiment="default", task=task)


def test_two_stages_gate_carry_and_tracking(compose, in_tmp):
    metrics = train(compose([*TWO_STAGES, GATE % 1, "task_name=two"]))
    run = run_of("two")
    assert [p.name for p in sorted(run.path.glob("phase*"))] == ["phase0", "phase1"]
    done = [json.loads((run.phase_dir(i) / "done.json").read_text()) for i in (0, 1)]
    assert [d["name"] for d in done] == ["a", "b"]
    assert done[0]["step_end"] == 12 and done[1]["step_end"] == 24  # the global step runs on
    assert metrics == done[1]["metrics"]
    gate = json.loads((run.phase_dir(0) / "gate.json").read_text())
    assert gate["passed"] and gate["metric"] == "eval/episode_return"
    assert gate["value"] == load_gate(run.gates_dir / "a.pt")["metrics"]["eval/episode_return"]
    assert not (run.gates_dir / "b.pt").exists()  # the last stage gates nothing

    # Stage b started from a's gate weights: its first checkpoint's starting point was a's actor.
    a_actor = {k: v for k, v in load_gate(run.gates_dir / "a.pt")["model_state_dict"].items() if k.startswith("actor.")}
    assert a_actor and all(torch.is_tensor(v) for v in a_actor.values())

    client = mlflow.MlflowClient(tracking_uri=store_uri("sqlite:///outputs/mlflow.db"))
    # MLflow caches its store per URI: runs of earlier tests (other folders) may share it.
    runs = [r for r in client.search_runs([client.get_experiment_by_name("default").experiment_id])
            if r.data.tags.get("meeple.run_id") == run.run_id]
    (parent,) = [r for r in runs if "meeple.pipeline" in r.data.tags]
    children = {r.data.tags["meeple.stage"]: r for r in runs if r is not parent}
    assert parent.data.tags["meeple.pipeline"] == "a -> b" and parent.info.status == "FINISHED"
    assert set(children) == {"a", "b"}
    assert all(c.data.tags["mlflow.parentRunId"] == parent.info.run_id for c in children.values())
    steps_a = [m.step for m in client.get_metric_history(children["a"].info.run_id, "eval/episode_return")]
    steps_b = [m.step for m in client.get_metric_history(children["b"].info.run_id, "eval/episode_return")]
    assert len(steps_a) == len(steps_b) == 3 and min(steps_b) > max(steps_a)  # one step axis
    # Steps count optimiser steps (epoch-end metrics at the rollout's last one), the module's too.
    assert max(steps_a) == done[0]["step_end"] - 1 and max(steps_b) == done[1]["step_end"] - 1
    assert [m.step for m in client.get_metric_history(children["a"].info.run_id, "train/frames")] == steps_a
    assert run.mlflow_run_id == parent.info.run_id
    assert run.stage_mlflow_runs == {"0": children["a"].info.run_id, "1": children["b"].info.run_id}


def test_carried_weights_are_the_gate_weights(compose, in_tmp, monkeypatch):
    seen = {}
    from meeple.pipeline import transition

    original = transition.carry_weights

    def spy(module, state, parts, source, **options):
        original(module, state, parts, source, **options)
        seen.update({k: v.clone() for k, v in module.state_dict().items() if k.startswith(("actor.", "critic."))})
        seen["source"] = state

    monkeypatch.setattr(transition, "carry_weights", spy)
    train(compose([*TWO_STAGES, "tracking=none", "task_name=carry"]))
    source = seen.pop("source")
    assert seen and all(torch.equal(seen[k], source[k]) for k in seen)


def test_failed_gate_stops_with_one_line_and_exit_3(tmp_path):
    done = subprocess.run(
        [sys.executable, str(REPO / "train.py"), *TWO_STAGES, GATE % 10_000],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 3, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("meeple:")]
    assert lines == [lines[0]] and "gate failed: phase 0 (a) eval/episode_return = " in lines[0]
    assert "needs >= 10000; phase 1 (b) did not start" in lines[0] and "Traceback" not in done.stderr
    (run_path,) = (tmp_path / "outputs" / "runs").iterdir()
    assert json.loads((run_path / "phase0" / "gate.json").read_text())["passed"] is False
    assert not (run_path / "phase1").exists()
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/outputs/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("default").experiment_id])
    (parent,) = [r for r in runs if "meeple.pipeline" in r.data.tags]
    assert parent.info.status == "FAILED" and "gate failed" in parent.data.tags["meeple.gate_failed"]


def test_crash_in_stage_two_resumes_without_rerunning_stage_one(compose, in_tmp, importable_tests):
    full = learning(train(compose([*TWO_STAGES, "task_name=full"])))
    with pytest.raises(SimulatedCrash):
        train(compose([*TWO_STAGES, *CRASH_IN_B, "task_name=cut"]))
    cut = run_of("cut")
    stage_a = {p: p.stat().st_mtime_ns for p in cut.phase_dir(0).rglob("*")}
    assert (cut.phase_dir(0) / "done.json").is_file() and not (cut.phase_dir(1) / "done.json").exists()

    resumed = learning(train(compose([*TWO_STAGES, "task_name=cut", "resume=true"])))
    assert resumed == full
    assert {p: p.stat().st_mtime_ns for p in cut.phase_dir(0).rglob("*")} == stage_a  # a was not re-run
    final_full = load_verified(run_of("full").checkpoint_dir(1) / LATEST)
    final_cut = load_verified(cut.checkpoint_dir(1) / LATEST)
    for key in ("model_state_dict", "optimizer_state_dict", "scheduler_state_dict", "rng_state", "loops"):
        assert_same(final_full[key], final_cut[key], key)

    client = mlflow.MlflowClient(tracking_uri=store_uri("sqlite:///outputs/mlflow.db"))
    full_run, cut_run = run_of("full"), cut
    for index in ("0", "1"):  # each stage's MLflow run, step for step (b's continued after the crash)
        assert histories(client, full_run.stage_mlflow_runs[index]) == histories(client, cut_run.stage_mlflow_runs[index])
    assert client.get_run(cut_run.mlflow_run_id).info.status == "FINISHED"

    again = train(compose([*TWO_STAGES, "task_name=cut", "resume=true"]))  # complete: nothing to do
    assert learning(again) == full
    assert load_verified(cut.checkpoint_dir(1) / LATEST)["global_step"] == final_cut["global_step"]


def test_resume_into_another_store_or_past_a_lost_run_logs_to_new_mlflow_runs(compose, in_tmp, importable_tests,
                                                                               caplog):
    other = "sqlite:///outputs/other.db"
    with pytest.raises(SimulatedCrash):
        train(compose([*TWO_STAGES, *CRASH_IN_B, "task_name=moved"]))
    first = run_of("moved")
    assert set(first.stage_mlflow_runs) == {"0", "1"}

    # Another store: the ids run.json holds belong to the first one, so new runs, recorded as such.
    with pytest.raises(SimulatedCrash):
        train(compose([*TWO_STAGES, *CRASH_IN_B, "task_name=moved", "resume=true", f"tracking.uri={other}"]))
    moved = run_of("moved")
    client = mlflow.MlflowClient(tracking_uri=store_uri(other))
    assert moved.mlflow_tracking_uri == absolute_sqlite_uri(other)  # the store, whatever the working directory
    assert set(moved.stage_mlflow_runs) == {"1"}  # a was not re-run
    assert moved.mlflow_run_id != first.mlflow_run_id
    for run_id in (moved.mlflow_run_id, moved.stage_mlflow_runs["1"]):
        assert client.get_run(run_id).info.status == "FAILED"

    # The same store, but the stage's recorded run is not in it (the store was replaced): a warning,
    # a new stage run under the pipeline's run, which goes on.
    record = json.loads((moved.path / "run.json").read_text())
    record["stage_mlflow_runs"]["1"] = "1" * 32
    (moved.path / "run.json").write_text(json.dumps(record))
    with caplog.at_level("WARNING"), pytest.raises(SimulatedCrash):
        train(compose([*TWO_STAGES, *CRASH_IN_B, "task_name=moved", "resume=true", f"tracking.uri={other}"]))
    assert f"the MLflow run {'1' * 32} that" in caplog.text and "is not an active run in" in caplog.text
    lost = run_of("moved")
    assert lost.mlflow_run_id == moved.mlflow_run_id and lost.stage_mlflow_runs["1"] != "1" * 32
    assert client.get_run(lost.stage_mlflow_runs["1"]).data.tags[PARENT_RUN_TAG] == moved.mlflow_run_id

    # The pipeline's run deleted (in the UI): a new one, and the stage's run starts anew under it.
    client.delete_run(moved.mlflow_run_id)
    caplog.clear()
    with caplog.at_level("WARNING"):
        train(compose([*TWO_STAGES, "task_name=moved", "resume=true", f"tracking.uri={other}"]))
    assert f"the MLflow run {moved.mlflow_run_id} that" in caplog.text
    done = run_of("moved")
    assert done.mlflow_run_id != moved.mlflow_run_id and done.stage_mlflow_runs["1"] != lost.stage_mlflow_runs["1"]
    assert client.get_run(done.mlflow_run_id).info.status == "FINISHED"
    stage = client.get_run(done.stage_mlflow_runs["1"])
    assert stage.info.status == "FINISHED" and stage.data.tags[PARENT_RUN_TAG] == done.mlflow_run_id


def test_one_stage_from_another_runs_gate(compose, in_tmp):
    base = [*TWO_STAGES, "tracking=none", "task_name=only"]
    with pytest.raises(ConfigError, match=r"no run of experiment 'default' .* has gates/a\.pt, which phase 0 \(a\) writes"):
        train(compose([*base, "+pipeline.start=b"]))
    # a mistyped or empty source names the setting it came from (not resume_dir)
    with pytest.raises(MeepleError, match=r"^pipeline.source='nowhere' is not a run directory \(no run.json\)$"):
        train(compose([*base, "+pipeline.start=b", "+pipeline.source=nowhere"]))
    with pytest.raises(MeepleError, match=r"^pipeline.source is empty; accepted: a run directory"):
        train(compose([*base, "+pipeline.start=b", "+pipeline.source="]))
    assert not Path("outputs/runs").exists() or not any(Path("outputs/runs").iterdir())
    train(compose([*base, "+pipeline.only=a"]))
    first = run_of("only")
    assert (first.gates_dir / "a.pt").is_file() and not first.phase_dir(1).exists()

    metrics = train(compose([*base, "+pipeline.start=b"]))
    second = run_of("only")
    assert second.path != first.path and metrics["train/frames"] == 96
    record = json.loads((second.phase_dir(0) / "done.json").read_text())
    assert record["imported_from"] == str(first.path)
    assert (second.gates_dir / "a.pt").read_bytes() == (first.gates_dir / "a.pt").read_bytes()
    assert not (second.checkpoint_dir(0)).exists()  # stage a did not run here


def test_pipeline_config_errors_name_the_stage(compose):
    from meeple.pipeline.plan import plan_run

    with pytest.raises(ConfigError, match=r"stage 'b': phase.lr=-1.0 is not allowed"):
        plan_run(compose([*TWO_STAGES, "pipeline.stages.b.phase.lr=-1"]))
    with pytest.raises(ConfigError, match=r"pipeline.order=\['a'\]"):
        plan_run(compose([*TWO_STAGES, "pipeline.order=[a]"]))
    with pytest.raises(ConfigError, match="pipeline.start='c' is not a stage of this pipeline; accepted: a, b"):
        plan_run(compose([*TWO_STAGES, "+pipeline.start=c"]))
    with pytest.raises(ConfigError, match=r"phase 0 \(b\) is the first stage: its transition \(finetune; carry="):
        plan_run(compose([*TWO_STAGES, "pipeline.order=[b,a]"]))
    with pytest.raises(ConfigError, match="reference_kl.coef > 0 needs a stage before it"):
        plan_run(compose([*TWO_STAGES, "pipeline.stages.a.phase.reference_kl.coef=0.5"]))
    with pytest.raises(ConfigError, match=r"phase 1 \(b\): transition.teacher='b' is not an earlier stage; accepted: a"):
        plan_run(compose([*TWO_STAGES, "+pipeline.stages.b.transition.teacher=b"]))
    with pytest.raises(ConfigError, match=r"transition.source='c' is not an earlier stage"):
        plan_run(compose([*TWO_STAGES, "+pipeline.stages.b.transition.source=c"]))
    with pytest.raises(ConfigError, match="needs checkpoints"):
        train(compose([*TWO_STAGES, "checkpoint=none", "tracking=none"]))


def test_gate_failure_is_a_meeple_error_for_sweeps(compose, in_tmp):
    with pytest.raises(GateFailed, match="did not start"):
        train(compose([*TWO_STAGES, GATE % 10_000, "tracking=none"]))
