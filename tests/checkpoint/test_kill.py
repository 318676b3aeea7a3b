"""SIGKILL in the middle of a save: the previous checkpoint survives and the run resumes.

The real CLI runs in a subprocess with a test-only pause between fsync of the ``.tmp`` and
the rename (``MEEPLE_TEST_PAUSE_BEFORE_RENAME``); the test kills it while the second
checkpoint is still a ``.tmp``, then resumes, and compares with an uninterrupted run: weights,
and the MLflow history (metrics held back by the logger's batching come back from the checkpoint).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import torch

from meeple.checkpoint.io import PAUSE_ENV, load_verified, sidecar_path
from meeple.checkpoint.retention import LATEST
from meeple.checkpoint.run_dir import find_latest_run
from meeple.cli.train import train
from tests.checkpoint.test_resume import histories
from tests.conftest import REPO

# 4 rollouts of 32 frames, 4 optimiser steps each; a checkpoint after every rollout.
# Metrics are held back for the whole run (flush_every_s; no learning-curve plot, which reads the
# store at the end): the killed process stored none, the checkpoint holds those before it.
ARGS = ["debug=tiny", "++tracking.system_metrics=false", "++tracking.flush_every_s=3600", "callbacks.progress=null",
        "callbacks.curves=null",
        "checkpoint.every_n_rollouts=1", "phase.total_frames=128", "task_name=killed"]


def _wait_for_interrupted_save(proc: subprocess.Popen, folder_glob: str, cwd: Path, timeout: float = 120) -> Path:
    """Block until one checkpoint is complete and the next one is a .tmp; return that .tmp."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        complete = [p for p in cwd.glob(f"{folder_glob}/ckpt_*.pt") if sidecar_path(p).exists()]
        partial = list(cwd.glob(f"{folder_glob}/ckpt_*.pt.tmp"))
        if complete and partial:
            return partial[0]
        assert proc.poll() is None, f"training ended before the test could kill it:\n{proc.stderr.read()}"
        time.sleep(0.02)
    raise AssertionError("no save in progress within the timeout")


def test_sigkill_mid_save_keeps_previous_checkpoint_and_resumes_exactly(tmp_path, monkeypatch):
    killed = tmp_path / "killed"
    killed.mkdir()
    folders = "outputs/runs/*/phase0/checkpoints"
    env = {**os.environ, PAUSE_ENV: "2"}
    store = f"tracking.uri=sqlite:///{killed}/mlflow.db"  # absolute: MLflow caches stores by URI
    proc = subprocess.Popen([sys.executable, str(REPO / "train.py"), *ARGS, store], cwd=killed, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        partial = _wait_for_interrupted_save(proc, folders, killed)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    folder = partial.parent
    assert partial.name == "ckpt_phase0_step00000008.pt.tmp" and partial.exists()
    assert not (folder / "ckpt_phase0_step00000008.pt").exists()  # never renamed into place
    assert (folder / LATEST).resolve().name == "ckpt_phase0_step00000004.pt"
    check = subprocess.run(["sha256sum", "-c", "ckpt_phase0_step00000004.pt.sha256"], cwd=folder,
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert load_verified(folder / LATEST)["global_step"] == 4

    done = subprocess.run([sys.executable, str(REPO / "train.py"), *ARGS, store, "resume=true"], cwd=killed,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    log = done.stdout + done.stderr  # Hydra logs to stdout
    assert "resuming run" in log and "from ckpt_phase0_step00000004.pt" in log
    assert not partial.exists()  # the resumed start cleaned the partial write
    resumed = load_verified(folder / LATEST)
    assert resumed["global_step"] == 16

    # Same weights as a run that was never interrupted.
    whole = tmp_path / "whole"
    whole.mkdir()
    monkeypatch.chdir(whole)
    from meeple.config.compose import compose_config

    train(compose_config([*ARGS, f"tracking.uri=sqlite:///{whole}/mlflow.db"]))
    (uninterrupted,) = whole.glob(f"{folders}/{LATEST}")
    reference = load_verified(uninterrupted)["model_state_dict"]
    assert all(torch.equal(reference[k], resumed["model_state_dict"][k]) for k in reference)

    # ... and the same MLflow history, step for step: nothing lost with the killed process.
    def history(cwd: Path) -> dict:
        run = find_latest_run(cwd / "outputs/runs", experiment="default", task="killed")
        return histories(mlflow.MlflowClient(f"sqlite:///{cwd}/mlflow.db"), run.mlflow_run_id)

    expected = history(whole)
    assert len(expected["train/frames"]) == 4 and history(killed) == expected
