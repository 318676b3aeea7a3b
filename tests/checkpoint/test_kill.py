"""SIGKILL in the middle of a save: the previous checkpoint survives and the run resumes.

The real CLI runs in a subprocess with a test-only pause between fsync of the ``.tmp`` and
the rename (``MEEPLE_TEST_PAUSE_BEFORE_RENAME``); the test kills it while the second
checkpoint is still a ``.tmp``, then resumes, and compares with an uninterrupted run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

from meeple.checkpoint.io import PAUSE_ENV, load_verified, sidecar_path
from meeple.checkpoint.retention import LATEST
from meeple.cli.train import train
from tests.conftest import REPO

# 4 rollouts of 32 frames, 4 optimiser steps each; a checkpoint after every rollout.
ARGS = ["debug=tiny", "tracking=none", "callbacks.progress=null", "checkpoint.every_n_rollouts=1",
        "phase.total_frames=128", "task_name=killed"]


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
    proc = subprocess.Popen([sys.executable, str(REPO / "train.py"), *ARGS], cwd=killed, env=env,
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

    done = subprocess.run([sys.executable, str(REPO / "train.py"), *ARGS, "resume=true"], cwd=killed,
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

    train(compose_config(ARGS))
    (uninterrupted,) = whole.glob(f"{folders}/{LATEST}")
    reference = load_verified(uninterrupted)["model_state_dict"]
    assert all(torch.equal(reference[k], resumed["model_state_dict"][k]) for k in reference)
