"""Learners on Lightning DDP (``hardware=ddp_cpu``: two processes over gloo on this machine).

Each test runs ``train.py`` as the user would: rank 0 is the process started here, and Lightning
starts rank 1 by running the same command again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import pytest

from meeple.checkpoint.io import load_verified
from meeple.checkpoint.retention import list_checkpoints
from meeple.checkpoint.run_dir import RunDirectory
from meeple.cli.train import train
from meeple.distributed import EXIT_PEER_LOST
from meeple.errors import ConfigError
from meeple.seeding import Component, PhaseSeeds
from tests.conftest import REPO


def command(tmp: Path, *overrides: str) -> list[str]:
    return [sys.executable, str(REPO / "train.py"), "hardware=ddp_cpu", f"checkpoint.root={tmp}/runs",
            f"tracking.uri=sqlite:///{tmp}/mlflow.db", f"paths.output_root={tmp}/out", *overrides]


def the_run(tmp: Path) -> RunDirectory:
    (path,) = (tmp / "runs").iterdir()  # one run directory: rank 1 made none of its own
    return RunDirectory.open(path)


def test_ranks_act_with_their_own_seeds_and_only_rank_zero_writes(tmp_path):
    done = subprocess.run(command(tmp_path, "debug=tiny"), cwd=tmp_path, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    run = the_run(tmp_path)

    ranks = json.loads((run.phase_dir(0) / "ranks.json").read_text())
    assert [r["rank"] for r in ranks] == [0, 1]
    # Rank 0 keeps the single-process seeds; rank 1 has its own envs, sampling and so its own data.
    assert ranks[0]["env_seeds"] == PhaseSeeds(1, 0).worker_seeds(Component.ENV, 1)
    assert ranks[1]["env_seeds"] == PhaseSeeds(1, 0, rank=1).worker_seeds(Component.ENV, 1)
    assert ranks[0]["env_seeds"] != ranks[1]["env_seeds"] and ranks[0]["data_seed"] != ranks[1]["data_seed"]
    assert ranks[0]["first_rollout_sha256"] != ranks[1]["first_rollout_sha256"]

    # The run directory holds what a single-process run's holds (plus ranks.json), nothing per rank.
    names = {p.relative_to(run.path).as_posix() for p in run.path.rglob("*") if p.is_file() or p.is_symlink()}
    assert {"run.json", "phase0/done.json", "phase0/ranks.json", "phase0/checkpoints/latest.pt"} <= names
    assert all(n.startswith(("run.json", "phase0/done.json", "phase0/ranks.json", "phase0/checkpoints/")) for n in names), names
    for path in list_checkpoints(run.checkpoint_dir(0), 0):
        assert load_verified(path)["phase"] == 0
    done_record = json.loads((run.phase_dir(0) / "done.json").read_text())
    # Both ranks' frames count: 2 ranks x 3 tiny rollouts of 32 frames.
    assert done_record["metrics"]["train/frames"] == 2 * 3 * 32

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("default").experiment_id])
    assert [r.info.run_id for r in runs] == [run.mlflow_run_id]  # one MLflow run, rank 0's
    frames = client.get_metric_history(run.mlflow_run_id, "train/frames")
    assert [m.value for m in frames] == [64.0, 128.0, 192.0]
    # Rank 1 says nothing at INFO level: one "run directory" line, and no progress of its own.
    output = done.stdout + done.stderr
    assert output.count("run directory ") == 1 and output.count("master seed 1") == 1
    assert "rank 1: " not in output


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def test_a_killed_rank_stops_the_run_with_one_line_and_resume_continues(tmp_path):
    # A run that would go on for minutes (the stop threshold is out of reach).
    long = ["phase.stop.eval_return=1e9", "checkpoint.min_interval_s=0"]
    proc = subprocess.Popen(command(tmp_path, *long), cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            latest = list((tmp_path / "runs").glob("*/phase0/checkpoints/ckpt_*.pt"))
            if len(latest) >= 2:
                break
            time.sleep(0.5)
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        (rank1,) = [pid for pid in _children(proc.pid) if "train.py" in Path(f"/proc/{pid}/cmdline").read_text()]
        os.kill(rank1, signal.SIGKILL)
        _, stderr = proc.communicate(timeout=60)  # the watcher looks every 5 s; gloo notices sooner
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == EXIT_PEER_LOST, stderr[-3000:]
    run = the_run(tmp_path)
    (line,) = [line for line in stderr.splitlines() if line.startswith("meeple: error:")]
    assert "learner rank" in line and str(run.path) in line and "resume=true" in line
    assert "Traceback" not in stderr
    saved = list_checkpoints(run.checkpoint_dir(0), 0)
    for path in saved:  # nothing half-written: every checkpoint left verifies
        load_verified(path)
    step = max(int(p.stem.rsplit("step", 1)[1]) for p in saved)

    # The same command with resume=true continues from the newest checkpoint (a shorter budget).
    resumed = subprocess.run(command(tmp_path, *long, "resume=true", f"phase.total_frames={1024 * (step // 16 + 6)}"),
                             cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"step{step:08d}.pt" in resumed.stdout + resumed.stderr  # "resuming run ... from ckpt_..."
    record = json.loads((run.phase_dir(0) / "done.json").read_text())
    assert record["step_end"] == (step // 16 + 6) * 16  # 16 optimiser steps a rollout


def _free_port() -> int:
    """A free port below the kernel's ephemeral range (32768+ on Linux), so no outgoing connection
    of another test takes it between this check and node 0's bind seconds later."""
    import random
    import socket

    for port in random.Random().sample(range(20000, 32000), 50):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 20000-32000")


def test_two_nodes_started_by_hand_train_as_one_run(tmp_path):
    """The several-machines recipe (docs/scaling.md) with both "nodes" on 127.0.0.1: node 0 is
    started first, node 1 with its NODE_RANK and the run directory and master seed node 0 printed."""
    import threading

    nodes = ["debug=tiny", "hardware.devices=1", "hardware.num_nodes=2", "seed=3"]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    node0 = subprocess.Popen(command(tmp_path, *nodes), cwd=tmp_path, env=dict(env, NODE_RANK="0"),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    printed: dict[str, str] = {}
    both = threading.Event()

    def read() -> None:  # drains node 0's output (a full pipe would stop it) and finds the two lines
        for line in node0.stdout:
            lines.append(line)
            for key in ("run directory", "master seed"):
                if f"- {key} " in line:
                    printed[key] = line.split(f"- {key} ", 1)[1].split()[0]
            if len(printed) == 2:
                both.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        # node 0 logs both before it waits for node 1 at the first fit
        assert both.wait(300), "".join(lines)[-3000:]
        node1 = subprocess.run(command(tmp_path, *nodes), cwd=tmp_path, capture_output=True, text=True, timeout=600,
                               env=dict(env, NODE_RANK="1", MEEPLE_RUN_DIR=printed["run directory"],
                                        MEEPLE_MASTER_SEED=printed["master seed"]))
        assert node0.wait(120) == 0, "".join(lines)[-3000:]
    finally:
        if node0.poll() is None:
            node0.kill()
    reader.join(10)
    assert node1.returncode == 0, node1.stderr[-3000:]
    assert printed["master seed"] == "3"
    run = the_run(tmp_path)  # node 1 made no run directory of its own
    assert str(run.path) == printed["run directory"]
    ranks = json.loads((run.phase_dir(0) / "ranks.json").read_text())
    assert [r["rank"] for r in ranks] == [0, 1] and ranks[0]["env_seeds"] != ranks[1]["env_seeds"]
    record = json.loads((run.phase_dir(0) / "done.json").read_text())
    assert record["metrics"]["train/frames"] == 2 * 3 * 32  # both nodes' frames, as with 2 local ranks


def test_ddp_cannot_start_from_python_or_a_sweep(compose, in_tmp):
    # Lightning starts the other ranks by running this process's command again: from pytest (or a
    # notebook, or a sweep trial) that would be the wrong command.
    with pytest.raises(ConfigError, match="start it as python train.py"):
        train(compose(["hardware=ddp_cpu", "debug=tiny", "tracking=none"]))
    with pytest.raises(ConfigError, match="which a sweep trial cannot start"):
        train(compose(["hardware=ddp_cpu", "debug=tiny", "tracking=none", "+trial.number=0"]))
    # Phase kinds that run in one process say so at validation.
    with pytest.raises(ConfigError, match="phase=packed_ppo does not support"):
        train(compose(["hardware=ddp_cpu", "+experiment=pixels_ppo", "debug=tiny"]))


@pytest.mark.parametrize("experiment, stages", [("cartpole_bc_ppo", 2), ("connect4_alphazero", 1)])
def test_bc_pipeline_and_alphazero_train_on_two_ranks(tmp_path, experiment, stages):
    """A pipeline (BC then PPO: two fits on one process group, the gate read by both ranks) and
    AlphaZero (self-play per rank, the gate's match on rank 0, promotion on both)."""
    done = subprocess.run(command(tmp_path, f"+experiment={experiment}", "debug=tiny"), cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    run = the_run(tmp_path)
    for index in range(stages):
        assert json.loads((run.phase_dir(index) / "done.json").read_text())["steps"] > 0
        assert list_checkpoints(run.checkpoint_dir(index), index)
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    assert len(runs) == (stages + 1 if stages > 1 else 1)  # one parent + a child per stage, nothing per rank
    if experiment == "connect4_alphazero":
        (az,) = runs
        assert [m.step for m in client.get_metric_history(az.info.run_id, "gate/score")]  # rank 0's match, logged once
