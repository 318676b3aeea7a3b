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


def serve(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "meeple.serve", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_serve_help_prints_usage(tmp_path):
    done = serve(tmp_path, "--help")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("usage: python -m meeple.serve")
    for text in (
        "connect4",
        "cartpole",
        "transport.address=null",
        "transport.num_workers=0",
        "transport.frame_timeout_s=5",
        "num_envs=8",
        "env.KEY=VALUE",
        "example:",
    ):
        assert text in out, text


@pytest.mark.parametrize(
    "args,line",
    [
        (["transport=inproc"], "transport=inproc cannot be served; accepted: socket, http, shm"),
        (["env=cartpol"], "env=cartpol: no such env config; accepted: cartpole, connect4"),
        (["transport=tcp"], "transport=tcp: no such transport config; accepted: http, shm, socket"),
        (
            ["transport.address=/nonexistent/c4.sock"],
            "transport.address=/nonexistent/c4.sock: folder /nonexistent does not exist; accepted:",
        ),
        (
            ["transport=http", "transport.address=localhost"],
            "transport.address=localhost; accepted for http: 127.0.0.1:PORT with PORT 0..65535",
        ),
        (["num_envs=0"], "num_envs=0; accepted: an integer >= 1"),
        (["num_envs=1.5"], "num_envs=1.5; accepted: an integer >= 1"),
        (["num_envs=abc"], "num_envs='abc'; accepted: an integer >= 1"),
        (
            ["transport=shm", "transport.num_workers=0"],
            "transport.num_workers=0: transport=shm steps envs in worker processes; accepted: 1..",
        ),
        (
            ["num_envs=2", "transport.num_workers=3"],
            "transport.num_workers=3 exceeds num_envs=2; accepted: 0..2",
        ),
        (["transport.frame_timeout_s=0"], "transport.frame_timeout_s=0; accepted: a number > 0"),
        (["num_env=4"], "Could not override 'num_env'; accepted: env=NAME, transport=NAME"),
        (["env.backend=nope"], "env.backend='nope' is not an installed env backend; installed:"),
    ],
    ids=lambda v: v if isinstance(v, str) else " ".join(v),
)
def test_every_serve_config_mistake_is_one_line_exit_2(tmp_path, args, line):
    done = serve(tmp_path, "env=cartpole", *args)
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr  # no traceback, no log
    assert done.stderr.startswith(f"meeple: error: {line}"), done.stderr
