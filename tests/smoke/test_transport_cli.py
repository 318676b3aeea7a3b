"""train.py through a remote env server: one config value moves the envs out of process."""

import subprocess
import sys

import pytest

from tests.conftest import REPO


@pytest.mark.parametrize("transport", ["socket", "shm"])
def test_ppo_trains_through_an_env_server(tmp_path, transport):
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "train.py"),
            "env=cartpole",
            f"transport={transport}",
            "debug=tiny",
            "tracking=none",
            "checkpoint=none",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-4000:]
    assert f"gym envs ({1 if transport == 'shm' else 0} worker processes) over {transport}" in log
    assert "final greedy evaluation" in log
    assert log.count("shutting down") >= 2, "every server started for the run is stopped"


def test_unserveable_transport_is_one_clear_line(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "meeple.serve", "env=cartpole", "transport=inproc"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2
    assert "transport=inproc cannot be served; accepted: socket, http, shm" in done.stderr
