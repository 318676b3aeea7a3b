"""What every run records beyond metrics, and the search config's wiring into a run."""

from __future__ import annotations

import threading
import time

import mlflow
import pytest

from meeple.cli.train import build_run
from meeple.sweep.pruning import OptunaPruning
from meeple.tracking.mlflow import make_mlflow_logger


def test_runs_log_system_metrics_and_environment(compose, tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    cfg = compose(["debug=tiny", f"tracking.uri={uri}", "++tracking.system_metrics_interval=0.2"])
    logger = make_mlflow_logger(cfg, master_seed=5)
    run_id = logger.run_id  # creates the run and starts the monitor
    time.sleep(1.0)
    logger.finalize("success")
    run = mlflow.MlflowClient(uri).get_run(run_id)
    assert run.info.status == "FINISHED"
    assert any(key.startswith("system/cpu") for key in run.data.metrics), sorted(run.data.metrics)
    assert any(key.startswith("system/system_memory") for key in run.data.metrics)
    tags = run.data.tags
    assert tags["seed"] == "5" and tags["hardware"] == "cpu"
    assert {"host.cpus", "host.memory_gb", "host.gpus", "version.tensordict", "version.hydra-core",
            "version.gymnasium", "version.lightning", "version.torchrl"} <= set(tags)
    assert "mlflow.parentRunId" not in tags  # only sweep trials are nested


def test_search_config_adds_a_pruning_callback_that_is_idle_outside_a_sweep(compose):
    cfg = compose(["hparams_search=ppo_cartpole", "debug=tiny", "phase.minibatch_size=16"])
    parts = build_run(cfg)
    pruning = parts.callbacks["pruning"]
    assert isinstance(pruning, OptunaPruning)
    assert pruning.monitor == "eval/episode_return" and pruning.trial_number is None
    assert "curves" in parts.callbacks


def test_metrics_are_written_in_the_background_and_seen_by_the_next_reader(compose, tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    cfg = compose(["debug=tiny", f"tracking.uri={uri}", "++tracking.system_metrics=false"])
    logger = make_mlflow_logger(cfg, master_seed=5, step_offset=100)
    writes = []
    client = logger.experiment
    log_batch = client.log_batch

    def recorded(*args, **kwargs):
        writes.append(threading.current_thread().name)
        return log_batch(*args, **kwargs)

    monkeypatch.setattr(client, "log_batch", recorded)
    for step in range(3):
        logger.log_metrics({"loss/total": float(step)}, step=step)
    history = logger.experiment.get_metric_history(logger.run_id, "loss/total")  # waits for the queue
    assert [(m.step, m.value) for m in history] == [(100, 0.0), (101, 1.0), (102, 2.0)]
    assert writes and all(name.startswith("meeple-mlflow") for name in writes)

    def broken(*args, **kwargs):
        raise RuntimeError("store unavailable")

    monkeypatch.setattr(client, "log_batch", broken)
    logger.log_metrics({"loss/total": 3.0}, step=3)
    with pytest.raises(RuntimeError, match="store unavailable"):
        logger.flush()
    logger.finalize("success")
    assert mlflow.MlflowClient(uri).get_run(logger.run_id).info.status == "FINISHED"


def test_metrics_go_in_one_batch_per_interval_and_a_checkpoint_keeps_what_is_not_stored(compose, tmp_path,
                                                                                       monkeypatch):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    cfg = compose(["debug=tiny", f"tracking.uri={uri}", "++tracking.system_metrics=false",
                   "++tracking.flush_every_s=3600"])
    logger = make_mlflow_logger(cfg, master_seed=5)
    client = logger.experiment
    calls = []
    log_batch = client.log_batch
    monkeypatch.setattr(client, "log_batch", lambda **kw: (calls.append(len(kw["metrics"])), log_batch(**kw)))
    for step in range(3):
        logger.log_metrics({"loss/total": float(step), "bad key!": 1.0}, step=step)
    assert calls == []  # held back: the interval has not passed
    pending = logger.pending_metrics()
    assert [(key, value, step) for key, value, _, step in pending] == [
        ("loss/total", 0.0, 0), ("bad key", 1.0, 0), ("loss/total", 1.0, 1), ("bad key", 1.0, 1),
        ("loss/total", 2.0, 2), ("bad key", 1.0, 2)]

    # A crash after they landed, the checkpoint taken at step 1: the resumed run sends the
    # checkpoint's pending rows again (MLflow keeps one copy of a metric identical in key, value,
    # step and timestamp), plus one that never landed, and does not log step 2 a second time.
    logger.flush()
    assert calls == [6] and logger.pending_metrics() == []
    logger.resume([*pending[:4], ("loss/total", 7.0, 1, 9)])
    for step in (2, 3):
        logger.log_metrics({"loss/total": 2.0, "bad key!": 1.0}, step=step)
    history = logger.experiment.get_metric_history(logger.run_id, "loss/total")
    assert sorted((m.step, m.value) for m in history) == [(0, 0.0), (1, 1.0), (2, 2.0), (3, 2.0), (9, 7.0)]
    logger.finalize("success")

    with pytest.raises(ValueError, match=r"tracking.flush_every_s=-1.0; accepted: a number of seconds >= 0"):
        make_mlflow_logger(compose(["debug=tiny", f"tracking.uri={uri}", "++tracking.flush_every_s=-1"]), master_seed=5)


def test_workers_that_start_together_share_the_oldest_parent_run(tmp_path):
    import optuna

    from meeple.sweep.tracking import PARENT_ATTR, SweepTracking

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    study = optuna.create_study(study_name="together", storage=f"sqlite:///{tmp_path}/optuna.db")
    first = SweepTracking(uri, "default").start_parent(study, params={"a": 1}, tags={})
    study.set_user_attr(PARENT_ATTR, "")  # the second worker read the study before the first wrote it
    second = SweepTracking(uri, "default").start_parent(study, params={"a": 1}, tags={})
    assert second == first and study.user_attrs[PARENT_ATTR] == first
    client = mlflow.MlflowClient(uri)
    active = client.search_runs([client.get_experiment_by_name("default").experiment_id], "tags.sweep = 'true'")
    assert [r.info.run_id for r in active] == [first]  # the second's own parent was deleted
