"""Resume through the real training entry point (in-process, tiny runs).

Exactness: on CPU with a fixed seed, a run interrupted after rollout k and resumed gives the
uninterrupted run's metrics (everything but perf/*, per rollout, as MLflow recorded them) and
its final state (weights, optimiser, scheduler, generators, data-side and env state).
"""

from __future__ import annotations

import logging
from pathlib import Path

import mlflow
import pytest
import torch

from meeple.checkpoint.callback import load_gate
from meeple.checkpoint.io import CheckpointError, ChecksumMismatch, load_verified
from meeple.checkpoint.retention import BEST, LATEST, list_checkpoints
from meeple.checkpoint.run_dir import find_latest_run
from meeple.cli.train import train
from meeple.errors import MeepleError
from meeple.tracking.mlflow import store_uri
from tests.checkpoint.helpers import SimulatedCrash

# 6 rollouts of 32 frames (4 optimiser steps each), an evaluation every 2, a checkpoint every one.
BASE = [
    "debug=tiny", "callbacks.progress=null", "phase.total_frames=192", "phase.eval.every_n_rollouts=2",
    "phase.eval.episodes=4", "phase.eval.max_steps=50", "checkpoint.every_n_rollouts=1",
    "++tracking.system_metrics=false",
]
STOP_AFTER = ["+callbacks.crash._target_=tests.checkpoint.helpers.CrashAfterRollouts", "+callbacks.crash.rollouts={}"]


def stop_after(rollouts: int) -> list[str]:
    return [STOP_AFTER[0], STOP_AFTER[1].format(rollouts)]


def learning(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if not k.startswith(("perf/", "system/"))}


def run_of(task: str):
    return find_latest_run(Path("outputs/runs"), experiment="default", task=task)


def assert_same(a, b, where="checkpoint"):
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert set(a) == set(b), f"{where}: keys {sorted(set(a) ^ set(b))}"
        for key in a:
            assert_same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def histories(client, run_id: str) -> dict[str, list[tuple[int, float]]]:
    keys = [k for k in client.get_run(run_id).data.metrics if not k.startswith(("perf/", "system/"))]
    return {k: sorted((m.step, m.value) for m in client.get_metric_history(run_id, k)) for k in keys}


def test_interrupted_then_resumed_equals_uninterrupted(compose, in_tmp, importable_tests):
    full = learning(train(compose([*BASE, "task_name=full"])))
    with pytest.raises(SimulatedCrash):
        train(compose([*BASE, "task_name=cut", *stop_after(3)]))
    cut = run_of("cut")
    assert [p.name for p in list_checkpoints(cut.checkpoint_dir(0), 0)][-1] == "ckpt_phase0_step00000012.pt"
    resumed = learning(train(compose([*BASE, "task_name=cut", "resume=true"])))

    assert resumed == full
    final_full = load_verified(run_of("full").checkpoint_dir(0) / LATEST)
    final_cut = load_verified(cut.checkpoint_dir(0) / LATEST)
    assert final_cut["global_step"] == final_full["global_step"] == 24
    for key in ("model_state_dict", "optimizer_state_dict", "scheduler_state_dict", "rng_state", "loops"):
        assert_same(final_full[key], final_cut[key], key)
    data_full, data_cut = final_full["RolloutDataModule"], final_cut["RolloutDataModule"]
    for state in (data_full, data_cut):
        state["stats"] = learning(state["stats"])
    assert_same(data_full, data_cut, "datamodule")  # incl. the collector's in-flight episodes
    assert_same(final_full["callbacks"]["GreedyEvaluation"], final_cut["callbacks"]["GreedyEvaluation"])
    assert final_cut["rng_state"]["seed_streams"] == {"EVALUATION": 3}

    # The resumed run kept logging into the interrupted run's MLflow run, step for step.
    client = mlflow.MlflowClient(tracking_uri=store_uri("sqlite:///outputs/mlflow.db"))
    experiment = client.get_experiment_by_name("default")
    # MLflow caches its store per URI: runs of earlier tests (other folders) may share it.
    here = str(Path.cwd().resolve())
    runs = {r.data.tags["meeple.run_id"]: r for r in client.search_runs([experiment.experiment_id])
            if r.data.tags.get("meeple.run_dir", "").startswith(here)}
    assert set(runs) == {run_of("full").run_id, cut.run_id}
    run_full, run_cut = runs[run_of("full").run_id], runs[cut.run_id]
    assert run_cut.info.status == "FINISHED" and run_cut.info.run_id == cut.mlflow_run_id
    assert run_cut.data.tags["meeple.run_dir"] == str(cut.path.resolve())
    assert histories(client, run_full.info.run_id) == histories(client, run_cut.info.run_id)


def test_corrupt_latest_falls_back_and_gates_are_verified_copies(compose, in_tmp, flip_byte, caplog):
    overrides = [*BASE, "phase.total_frames=96", "checkpoint.gate=bc_best", "tracking=none", "task_name=gated"]
    train(compose(overrides))
    run = run_of("gated")
    folder = run.checkpoint_dir(0)
    gate = run.gates_dir / "bc_best.pt"
    assert gate.is_file() and not gate.is_symlink()
    assert gate.read_bytes() == (folder / BEST).resolve().read_bytes()
    assert load_gate(gate)["global_step"] == load_verified(folder / BEST)["global_step"]

    latest = (folder / LATEST).resolve()
    assert latest.name == "ckpt_phase0_step00000012.pt"
    flip_byte(latest)
    unfinish = (run.phase_dir(0) / "done.json").unlink  # as if killed before the stage was marked done
    unfinish()
    with caplog.at_level(logging.WARNING):
        metrics = train(compose([*overrides, "resume=true"]))
    assert "cannot resume from ckpt_phase0_step00000012.pt" in caplog.text
    assert "resuming from ckpt_phase0_step00000008.pt, an older checkpoint" in caplog.text
    assert metrics["train/frames"] == 96
    assert load_verified(folder / LATEST)["global_step"] == 12  # the last rollout was redone and saved

    unfinish()
    every = list_checkpoints(folder, 0)
    for path in every:
        flip_byte(path)
    with pytest.raises(CheckpointError, match="no usable checkpoint") as failed:
        train(compose([*overrides, "resume=true"]))
    assert all(path.name in str(failed.value) for path in every)

    flip_byte(gate)
    with pytest.raises(ChecksumMismatch):  # gates get no fallback
        load_gate(gate)


def test_resume_without_env_snapshots_still_resumes_but_warns(compose, in_tmp, importable_tests,
                                                                monkeypatch, caplog):
    monkeypatch.setattr("meeple.phases.ppo.build.env_snapshots", lambda *args, **kwargs: None)  # a backend without them
    overrides = [*BASE, "phase.total_frames=96", "tracking=none"]
    with pytest.raises(SimulatedCrash):
        train(compose([*overrides, *stop_after(2)]))
    with caplog.at_level(logging.WARNING):
        first = learning(train(compose([*overrides, "resume=true"])))
    assert "resume is not bit-exact" in caplog.text and first["train/frames"] == 96


def test_resume_errors_are_clear_and_bad_configs_write_nothing(compose, in_tmp):
    with pytest.raises(MeepleError, match="phase.minibatch_size=999999"):
        train(compose(["debug=tiny", "tracking=none", "phase.minibatch_size=999999"]))
    assert not Path("outputs/runs").exists() or not any(Path("outputs/runs").iterdir())
    with pytest.raises(MeepleError, match="no run of experiment 'default'"):
        train(compose([*BASE, "tracking=none", "resume=true"]))
    with pytest.raises(MeepleError, match="checkpoint=default"):
        train(compose(["debug=tiny", "tracking=none", "checkpoint=none", "resume=true"]))


@pytest.mark.parametrize("bad", ["env.id=NoSuchEnv-v0", "transport=socket transport.address=/tmp/no-server.sock"])
def test_a_config_that_fails_before_any_write_leaves_no_run_directory(compose, in_tmp, bad):
    with pytest.raises(MeepleError):
        train(compose(["debug=tiny", "tracking=none", *bad.split()]))
    assert not any(Path("outputs/runs").glob("*")), list(Path("outputs/runs").glob("*/*"))


def test_resuming_with_a_smaller_budget_than_trained_is_one_line(compose, in_tmp, importable_tests):
    overrides = [*BASE, "tracking=none", "task_name=shrink"]
    with pytest.raises(SimulatedCrash):  # as the 4th of 6 rollouts (2 envs x 16 steps) starts
        train(compose([*overrides, *stop_after(4)]))
    with pytest.raises(MeepleError) as err:  # was Lightning's MisconfigurationException
        train(compose([*overrides, "phase.total_frames=64", "resume=true"]))
    text = str(err.value)
    assert "has trained 3 epochs (rollouts, or iterations), more than this config's budget of 2" in text
    assert "(phase.total_frames=64); accepted: a budget of at least 3 epochs" in text
    assert "\n" not in text


def test_resume_refuses_another_experiments_run_and_prefers_runs_with_progress(compose, in_tmp, caplog):
    overrides = [*BASE, "phase.total_frames=64", "task_name=pick"]
    train(compose(overrides))
    real = run_of("pick")
    client = mlflow.MlflowClient(tracking_uri=store_uri("sqlite:///outputs/mlflow.db"))
    status = client.get_run(real.mlflow_run_id).info.status
    with pytest.raises(MeepleError, match=r"is a run of experiment 'default', not 'cartpole_ppo'"):
        train(compose(["+experiment=cartpole_ppo", *overrides, f"resume_dir={real.path}"]))
    assert client.get_run(real.mlflow_run_id).info.status == status  # nothing was touched

    # A newer run that failed before its first checkpoint is not what resume=true picks.
    from meeple.checkpoint.run_dir import RunDirectory

    empty = RunDirectory.create(Path("outputs/runs"), master_seed=9, experiment="default", task="pick")
    assert run_of("pick").path == real.path and empty.path != real.path
    with caplog.at_level(logging.WARNING):
        train(compose([*overrides, "resume=true"]))
    assert "is complete" in caplog.text and "ignored" not in caplog.text  # no seed was given: no seed warning


def test_a_save_waits_for_min_interval_but_improvements_and_the_end_always_save(compose, in_tmp):
    overrides = [*BASE, "tracking=none", "task_name=spaced"]
    train(compose([*overrides, "checkpoint.min_interval_s=3600"]))
    steps = [int(p.stem[-8:]) for p in list_checkpoints(run_of("spaced").checkpoint_dir(0), 0)]
    best = load_verified(run_of("spaced").checkpoint_dir(0) / BEST)["global_step"]
    # evaluations at rollouts 2, 4, 6 (steps 8, 16, 24): the first always improves, the last saves
    assert steps[0] == 8 and steps[-1] == 24 and best in steps and set(steps) <= {8, 16, 24}, steps

    train(compose([*overrides, "checkpoint.min_interval_s=0", "task_name=every"]))
    assert [int(p.stem[-8:]) for p in list_checkpoints(run_of("every").checkpoint_dir(0), 0)] == [4, 8, 12, 16, 20, 24]
