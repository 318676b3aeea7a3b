"""Real sweeps through the CLI (`python train.py -m hparams_search=ppo_cartpole`), from a tmp cwd."""

from __future__ import annotations

import subprocess
import sys

import mlflow
import optuna
import pytest
import yaml

from tests.conftest import REPO

TRAIN = str(REPO / "train.py")
# debug=tiny rollouts are 32 frames: under it the search draws its minibatch from debug_sizes/search (16).
TINY = ["debug=tiny", "callbacks.progress=null"]


def sweep(cwd, *args, timeout=300, returncode=0):
    done = subprocess.run(
        [sys.executable, TRAIN, "-m", "hparams_search=ppo_cartpole", *TINY,
         f"tracking.uri=sqlite:///{cwd}/mlflow.db", f"hydra.sweeper.storage=sqlite:///{cwd}/optuna.db", *args],
        cwd=cwd, capture_output=True, text=True, timeout=timeout,
    )
    assert done.returncode == returncode, (done.stdout + done.stderr)[-4000:]
    return done


@pytest.fixture(scope="module")
def first_sweep(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("sweep")
    done = sweep(cwd, "hydra.sweeper.n_trials=3")
    return cwd, done


def study_of(cwd):
    return optuna.load_study(study_name="ppo_cartpole", storage=f"sqlite:///{cwd}/optuna.db")


def test_three_trial_sweep_stores_trials_and_nested_runs(first_sweep):
    cwd, done = first_sweep
    study = study_of(cwd)
    assert [t.state.name for t in study.trials] == ["COMPLETE"] * 3
    # debug=tiny narrows the search's 128..512 to 16 (a 512 would not fit the rollout): the value
    # recorded is the value trained with
    assert {t.params["phase.minibatch_size"] for t in study.trials} == {16}

    client = mlflow.MlflowClient(f"sqlite:///{cwd}/mlflow.db")
    experiment = client.get_experiment_by_name("default")
    runs = client.search_runs([experiment.experiment_id])
    (parent,) = [r for r in runs if r.data.tags.get("sweep") == "true"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert sorted(r.data.tags["optuna_trial"] for r in children) == ["0", "1", "2"]
    for child in children:
        assert child.info.status == "FINISHED" and child.data.tags["trial_state"] == "COMPLETE"
        assert "eval/episode_return" in child.data.metrics
        assert child.data.params["trial/number"] == child.data.tags["optuna_trial"]
        tags = child.data.tags
        for key in ("git_sha", "git_dirty", "seed", "hardware", "host", "host.os", "version.torch",
                    "version.optuna", "version.mlflow", "version.meeple", "run_dir"):
            assert key in tags, key
        artifacts = {a.path for a in client.list_artifacts(child.info.run_id, "plots")}
        assert "plots/learning_curves.png" in artifacts

    # best params: printed, written beside the trials, logged with the plots on the parent run
    out = done.stdout + done.stderr
    assert "best trial of study 'ppo_cartpole'" in out
    # debug=tiny routes its output to its own task folder
    (best_file,) = list(cwd.glob("outputs/debug/multirun/*/best_params.yaml"))
    best = yaml.safe_load(best_file.read_text())
    assert best["best_trial"] == study.best_trial.number and best["best_value"] == study.best_value
    assert set(best["params"]) == {"phase.lr", "phase.loss.entropy_coef", "phase.loss.clip_epsilon",
                                   "phase.minibatch_size"}
    parent_artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    parent_plots = {a.path for a in client.list_artifacts(parent.info.run_id, "plots")}
    assert "best_params.yaml" in parent_artifacts
    for name in ("optimization_history", "parallel_coordinate", "param_importances"):
        assert f"plots/{name}.html" in parent_plots and f"plots/{name}.png" in parent_plots
    assert parent.info.status == "FINISHED" and parent.data.metrics["trials_complete"] == 3


def test_resume_adds_trials_and_a_failing_trial_does_not_stop_the_sweep(first_sweep):
    cwd, _ = first_sweep
    # Same study name: continues. A grid over a valid and an impossible budget gives one COMPLETE
    # and one FAIL trial (1 frame is less than one 32-frame rollout), and the sweep still finishes.
    done = sweep(cwd, "hydra.sweeper.n_trials=2", "hydra.sweeper.sampler.name=grid",
                 "phase.total_frames=choice(96,1)", "phase.minibatch_size=16", "phase.lr=1e-3",
                 "phase.loss.entropy_coef=0.01", "phase.loss.clip_epsilon=0.2")
    study = study_of(cwd)
    assert len(study.trials) == 5
    assert [t.number for t in study.trials] == [0, 1, 2, 3, 4]
    new = {t.params["phase.total_frames"]: t for t in study.trials[3:]}
    assert new[96].state.name == "COMPLETE"
    assert new[1].state.name == "FAIL"
    assert "phase.total_frames=1 is less than one rollout" in new[1].user_attrs["error"]
    assert "best trial of study" in done.stdout + done.stderr

    client = mlflow.MlflowClient(f"sqlite:///{cwd}/mlflow.db")
    experiment = client.get_experiment_by_name("default")
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if r.data.tags.get("sweep") == "true"]
    assert len(parents) == 1, "a resumed sweep keeps its parent run"
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id]
    assert len(children) == 5
    failed = [r for r in children if r.data.tags["trial_state"] == "FAIL"]
    assert len(failed) == 1 and failed[0].info.status == "FAILED"


def test_readme_narrowing_sweep_switches_sampler_and_pruner(tmp_path):
    # The README's command (minibatch 16 instead of 256: tiny rollouts hold 32 frames). The
    # median pruner's options in the search config must not reach the halving pruner.
    sweep(tmp_path, "hydra.sweeper.n_trials=2", "phase.lr=tag(log,interval(3e-4,3e-3))",
          "phase.minibatch_size=16", "hydra.sweeper.sampler.name=random", "hydra.sweeper.pruner.name=halving")
    study = study_of(tmp_path)
    assert [t.state.name for t in study.trials] == ["COMPLETE", "COMPLETE"]


def test_a_sweep_whose_every_trial_failed_exits_non_zero(tmp_path):
    done = sweep(tmp_path, "hydra.sweeper.n_trials=2", "phase.total_frames=1", returncode=1)
    assert "meeple: error: all 2 trials of this sweep failed; the first: " in done.stderr
    assert "phase.total_frames=1 is less than one rollout" in done.stderr
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("default").experiment_id])
    (parent,) = [r for r in runs if r.data.tags.get("sweep") == "true"]
    assert parent.info.status == "FAILED" and parent.data.metrics["trials_fail"] == 2


def pipeline_sweep(cwd, *args, returncode=0):
    cwd.mkdir()
    done = subprocess.run(
        [sys.executable, TRAIN, "-m", "+experiment=cartpole_bc_ppo", "hydra/sweeper=meeple_optuna",
         "debug=tiny", "callbacks.progress=null", "hydra.sweeper.study_name=bc_ppo", "hydra.sweeper.n_trials=2",
         "hydra.sweeper.direction=maximize", "hydra.sweeper.sampler.seed=1",
         "pipeline.stages.ppo.phase.lr=choice(0.001,0.002)", f"tracking.uri=sqlite:///{cwd}/mlflow.db",
         f"hydra.sweeper.storage=sqlite:///{cwd}/optuna.db", *args],
        cwd=cwd, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == returncode, (done.stdout + done.stderr)[-4000:]
    return optuna.load_study(study_name="bc_ppo", storage=f"sqlite:///{cwd}/optuna.db")


def test_sweep_over_a_pipeline_uses_the_last_stage_and_fails_trials_at_a_gate(tmp_path):
    study = pipeline_sweep(tmp_path / "ok")
    assert [t.state.name for t in study.trials] == ["COMPLETE"] * 2
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/ok/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("cartpole_bc_ppo").experiment_id])
    for trial in study.trials:  # the objective is the last stage's greedy return
        (stage,) = [r for r in runs if r.data.tags.get("meeple.stage") == "ppo"
                    and r.data.tags.get("optuna_trial") == str(trial.number)]
        assert trial.value == stage.data.metrics["eval/episode_return"]

    gated = pipeline_sweep(tmp_path / "gated", "pipeline.stages.ppo.transition.gate.threshold=10000",
                           returncode=1)
    assert [t.state.name for t in gated.trials] == ["FAIL"] * 2
    assert all("gate failed: phase 0 (bc)" in t.user_attrs["error"] for t in gated.trials)
