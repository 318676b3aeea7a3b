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
