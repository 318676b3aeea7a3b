"""``python train.py +experiment=independent_dqn`` as a user runs it: tracked per agent, stoppable."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import mlflow
import psutil

from tests.conftest import REPO
from tests.multiagent.conftest import TINY
from tests.multiagent.test_topology import assert_no_survivors

TRAIN = str(REPO / "train.py")
# TINY minus tracking=none: these runs log to sqlite under the test's folder
ARGS = [a for a in TINY if a != "tracking=none"] + ["seed=5"]


def test_cli_run_logs_one_curve_per_agent(tmp_path):
    done = subprocess.run(
        [sys.executable, TRAIN, *ARGS], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "greedy return" in done.stderr + done.stdout

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/outputs/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name("independent_dqn").experiment_id])
    assert run.info.status == "FINISHED"
    assert run.data.tags["phase"] == "dqn" and run.data.params["phase/publish_interval"] == "5"
    metrics = run.data.metrics
    for agent in ("agent_0", "agent_1"):
        for key in (
            f"train/{agent}/episode_return",
            f"eval/{agent}/episode_return",
            f"eval/{agent}/random_return",
            f"loss/{agent}/td",
            f"perf/{agent}/updates_per_s",
        ):
            assert key in metrics, sorted(metrics)
        curve = client.get_metric_history(run.info.run_id, f"train/{agent}/episode_return")
        assert len(curve) == 400 // 25  # one point per episode, at its env step
        assert sorted(m.step for m in curve) == list(range(25, 401, 25))
    for key in (
        "train/episode_return",
        "eval/episode_return",
        "perf/env_steps_per_s",
        "train/epsilon",
    ):
        assert key in metrics


def test_ctrl_c_stops_every_process(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, TRAIN, *ARGS, "phase.total_env_steps=1000000", "tracking=none"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        parent = psutil.Process(proc.pid)
        deadline = time.monotonic() + 300
        workers: list[psutil.Process] = []
        while time.monotonic() < deadline:
            workers = [c for c in parent.children() if "spawn_main" in " ".join(c.cmdline())]
            # the workers are up once their CPU time grows past interpreter start-up
            if len(workers) == 3 and all(w.cpu_times().user > 3 for w in workers):
                break
            time.sleep(0.5)
        assert len(workers) == 3, "expected 1 actor + 2 learner processes"
        time.sleep(2)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out[-3000:]
    assert "stopped by request" in out
    assert took < 15, f"Ctrl-C took {took:.1f}s"
    assert_no_survivors([w.pid for w in workers])
