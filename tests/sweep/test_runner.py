"""The trial loop without training: a fake launcher runs a synthetic objective per trial."""

from __future__ import annotations

from types import SimpleNamespace

import mlflow
import optuna
import pytest
from hydra.core.utils import JobReturn, JobStatus
from optuna.trial import TrialState

from meeple.config.compose import compose_config
from meeple.sweep.pruning import OptunaPruning, active_trial
from meeple.sweep.runner import SweepRunner, SweepSettings
from meeple.sweep.space import parse_search_space
from meeple.sweep.tracking import SweepTracking
from meeple.tracking.mlflow import make_mlflow_logger

SPACE = {"phase.lr": "tag(log, interval(1e-4, 1e-2))", "phase.minibatch_size": "choice(8, 16)"}


def overrides_to_dict(overrides):
    return dict(o.lstrip("+").split("=", 1) for o in overrides)


class FakeLauncher:
    """Runs ``task(args, trial_number)`` per job, catching errors as Hydra's run_job does."""

    def __init__(self, task):
        self.task = task
        self.jobs: list[list[str]] = []

    def __call__(self, batch, initial_job_idx):
        returns = []
        for overrides in batch:
            self.jobs.append(list(overrides))
            ret = JobReturn(overrides=list(overrides))
            try:
                ret.return_value = self.task(overrides_to_dict(overrides))
                ret.status = JobStatus.COMPLETED
            except Exception as err:
                ret.return_value = err
                ret.status = JobStatus.FAILED
            returns.append(ret)
        return returns


def runner(tmp_path, task, *, n_trials=3, pruner=None, tracking=None, study="s", storage=None, sampler=None):
    settings = SweepSettings(
        study_name=study,
        storage=storage or f"sqlite:///{tmp_path}/optuna.db",
        n_trials=n_trials,
        sampler=sampler or {"name": "random", "seed": 0},
        pruner=pruner or {"name": "none"},
        plots=False,
        metric="eval/episode_return",
    )
    space = parse_search_space(SPACE, ["debug=tiny"])
    return SweepRunner(settings, space, FakeLauncher(task), sweep_dir=tmp_path / "sweep", tracking=tracking)


def curve_task(curves, *, logger_for=None):
    """A training run in miniature: reports ``curves[trial]`` through the real pruning callback."""

    def task(args):
        number = int(args["trial.number"])
        callback = OptunaPruning(study=args["trial.study"], trial_number=number)
        evaluation = SimpleNamespace(history=[])
        trainer = SimpleNamespace(callbacks=[evaluation], callback_metrics={}, datamodule=None, current_epoch=0)
        logger = logger_for(args) if logger_for else None
        callback.on_fit_start(trainer, None)
        try:
            for step, value in enumerate(curves[number], start=1):
                evaluation.history.append((step * 1000, value))
                callback.on_train_epoch_end(trainer, None)
        except optuna.TrialPruned:
            if logger is not None:
                logger.finalize("failed")  # what Lightning does on any exception
            raise
        if logger is not None:
            logger.finalize("success")
        return curves[number][-1]

    return task


def test_pruner_prunes_a_bad_synthetic_trial(tmp_path):
    good, bad = [10.0, 20.0, 30.0], [1.0, 2.0, 3.0]
    sweep = runner(tmp_path, curve_task([good, good, good, bad]), n_trials=4,
                   pruner={"name": "median", "kwargs": {"median": {"n_startup_trials": 2, "n_warmup_steps": 0}}})
    study = sweep.run()
    states = [t.state for t in study.trials]
    assert states == [TrialState.COMPLETE] * 3 + [TrialState.PRUNED]
    pruned = study.trials[3]
    assert pruned.intermediate_values == {1000: 1.0}  # stopped at its first report
    assert active_trial("s", 3) is None  # unregistered once told


def test_a_failing_trial_is_recorded_fail_and_the_sweep_goes_on(tmp_path):
    def task(args):
        if args["trial.number"] == "1":
            raise ValueError("synthetic failure")
        return 1.0

    study = runner(tmp_path, task, n_trials=3).run()
    assert [t.state for t in study.trials] == [TrialState.COMPLETE, TrialState.FAIL, TrialState.COMPLETE]
    assert study.trials[1].user_attrs["error"] == "ValueError: synthetic failure"
    assert (tmp_path / "sweep" / "best_params.yaml").exists()


def test_missing_objective_is_a_failure(tmp_path):
    study = runner(tmp_path, lambda args: None, n_trials=1).run()
    assert study.trials[0].state == TrialState.FAIL
    assert "no finite eval/episode_return" in study.trials[0].user_attrs["error"]


def test_resuming_a_study_adds_trials_and_keeps_its_parent_run(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    first = runner(tmp_path, lambda args: float(args["phase.lr"]), n_trials=2,
                   tracking=SweepTracking(uri, "exp")).run()
    parent = first.user_attrs["mlflow_parent_run_id"]
    second = runner(tmp_path, lambda args: float(args["phase.lr"]), n_trials=2,
                    tracking=SweepTracking(uri, "exp")).run()
    assert len(second.trials) == 4 and [t.number for t in second.trials] == [0, 1, 2, 3]
    assert second.user_attrs["mlflow_parent_run_id"] == parent
    client = mlflow.MlflowClient(uri)
    assert client.get_run(parent).info.status == "FINISHED"
    assert client.get_run(parent).data.metrics["trials_complete"] == 4


def test_mlflow_trial_runs_are_nested_and_carry_their_state(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"

    def logger_for(args):
        cfg = compose_config(["debug=tiny", f"tracking.uri={uri}", "tracking.experiment=exp",
                              f"++trial.study={args['trial.study']}", f"++trial.number={args['trial.number']}",
                              f"++tracking.parent_run_id={args['tracking.parent_run_id']}",
                              "++tracking.system_metrics=false"])
        logger = make_mlflow_logger(cfg, master_seed=1)
        assert logger.run_id  # creates the run, as log_run_config does in train()
        return logger

    good, bad = [10.0, 20.0], [1.0, 2.0]
    curves = [good, good, bad, None]

    def task(args):
        if args["trial.number"] == "3":
            raise RuntimeError("dies before its run exists")
        return curve_task(curves, logger_for=logger_for)(args)

    tracking = SweepTracking(uri, "exp")
    study = runner(tmp_path, task, n_trials=4, tracking=tracking,
                   pruner={"name": "median", "kwargs": {"median": {"n_startup_trials": 2, "n_warmup_steps": 0}}}).run()
    assert [t.state.name for t in study.trials] == ["COMPLETE", "COMPLETE", "PRUNED", "FAIL"]

    client = mlflow.MlflowClient(uri)
    experiment = client.get_experiment_by_name("exp")
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if r.data.tags.get("sweep") == "true"]
    assert len(parents) == 1
    parent = parents[0]
    children = {int(r.data.tags["optuna_trial"]): r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id}
    assert sorted(children) == [0, 1, 2, 3]
    assert [children[n].data.tags["trial_state"] for n in range(4)] == ["COMPLETE", "COMPLETE", "PRUNED", "FAIL"]
    assert [children[n].info.status for n in range(4)] == ["FINISHED", "FINISHED", "KILLED", "FAILED"]
    assert "dies before its run exists" in children[3].data.tags["trial_error"]
    assert children[3].data.params.keys() == {"phase.lr", "phase.minibatch_size"}
    assert parent.data.tags["best_trial"] in {"0", "1"}
    assert parent.data.metrics["trials_pruned"] == 1 and parent.data.metrics["trials_fail"] == 1
    history = client.get_metric_history(parent.info.run_id, "trial_value")
    assert sorted(m.step for m in history) == [0, 1]


def test_grid_sampler_stops_when_the_grid_is_covered(tmp_path):
    sweep = runner(tmp_path, lambda args: 1.0, n_trials=10, sampler={"name": "grid"})
    sweep.space = parse_search_space({"phase.minibatch_size": "choice(8, 16)"})
    study = sweep.run()
    assert len(study.trials) == 2
    assert sorted(t.params["phase.minibatch_size"] for t in study.trials) == [8, 16]


@pytest.mark.parametrize("name", ["tpe", "cmaes", "random", "qmc"])
def test_samplers_by_name(tmp_path, name):
    study = runner(tmp_path, lambda args: float(args["phase.lr"]), n_trials=2, sampler={"name": name, "seed": 1},
                   study=name).run()
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 2


def test_resuming_with_other_choices_is_a_clear_error(tmp_path):
    from meeple.errors import ConfigError

    runner(tmp_path, lambda args: 1.0, n_trials=1).run()
    changed = runner(tmp_path, lambda args: 1.0, n_trials=1)
    changed.space = parse_search_space({"phase.minibatch_size": "choice(8, 999)"})
    with pytest.raises(ConfigError, match="phase.minibatch_size.*hydra.sweeper.study_name"):
        changed.create_study()


def test_a_resumed_seeded_study_does_not_replay_its_first_samples(tmp_path):
    first = runner(tmp_path, lambda args: 1.0, n_trials=2, sampler={"name": "random", "seed": 3}).run()
    again = runner(tmp_path, lambda args: 1.0, n_trials=2, sampler={"name": "random", "seed": 3}).run()
    lrs = [t.params["phase.lr"] for t in again.trials]
    assert len(lrs) == 4 and len(set(lrs)) == 4
    assert [t.params for t in first.trials[:2]] == [t.params for t in again.trials[:2]]


def test_a_launch_whose_every_trial_failed_says_so(tmp_path):
    def task(args):
        raise ValueError(f"broken trial {args['trial.number']}")

    sweep = runner(tmp_path, task, n_trials=2)
    sweep.run()
    assert sweep.all_failed() == "all 2 trials of this sweep failed; the first: ValueError: broken trial 0"


def test_one_good_trial_is_not_a_failed_sweep(tmp_path):
    def task(args):
        if args["trial.number"] == "0":
            raise ValueError("broken")
        return 1.0

    sweep = runner(tmp_path, task, n_trials=2)
    sweep.run()
    assert sweep.all_failed() is None
