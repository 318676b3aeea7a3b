"""``python train.py +experiment=independent_dqn`` as a user runs it: tracked per agent, stoppable."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
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
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    try:
        parent = psutil.Process(proc.pid)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not any(
            "worker processes running" in ln for ln in lines
        ):
            assert proc.poll() is None, "".join(lines)[-3000:]
            time.sleep(0.2)
        workers = [c for c in parent.children() if "spawn_main" in " ".join(c.cmdline())]
        assert len(workers) == 3, "expected 1 actor + 2 learner processes"
        time.sleep(2)  # let them train a little
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        # the bound that matters: every worker is gone (the main interpreter's own exit is not timed)
        _, alive = psutil.wait_procs(workers, timeout=30)
        workers_s = time.monotonic() - t0
        proc.wait(timeout=120)
        reader.join(timeout=10)
        out = "".join(lines)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not alive and workers_s < 5, (
        f"workers still alive {workers_s:.1f}s after Ctrl-C: {alive}"
    )
    assert proc.returncode == 130, out[-3000:]
    assert "stopped by request" in out
    assert_no_survivors([w.pid for w in workers])
