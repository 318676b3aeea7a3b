"""train.py through a remote env server: one config value moves the envs out of process."""

import socket
import subprocess
import sys

import pytest

from meeple.transport.launch import READY
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
        (["env=cartpol"], "env=cartpol: no such env config; accepted: autobattler, cartpole, connect4"),
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
        (["env=mpe_spread"], "env.backend=pettingzoo (a multi-agent env) cannot be served: phase=dqn"),
    ],
    ids=lambda v: v if isinstance(v, str) else " ".join(v),
)
def test_every_serve_config_mistake_is_one_line_exit_2(tmp_path, args, line):
    done = serve(tmp_path, "env=cartpole", *args)
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr  # no traceback, no log
    assert done.stderr.startswith(f"meeple: error: {line}"), done.stderr


@pytest.fixture
def connect4_server(tmp_path):
    """``python -m meeple.serve env=connect4 transport=socket num_envs=2`` (the README's pair)."""
    address = str(tmp_path / "c4.sock")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "meeple.serve",
            "env=connect4",
            "transport=socket",
            "num_envs=2",
            f"transport.address={address}",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        for line in proc.stdout:
            if line.startswith(READY):
                break
        assert proc.poll() is None, "the server did not start"
        yield address
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0


def train_connect4(tmp_path, address, *extra):
    return subprocess.run(
        [
            sys.executable,
            str(REPO / "train.py"),
            "env=connect4",
            "transport=socket",
            f"transport.address={address}",
            "debug=tiny",
            "tracking=none",
            "checkpoint=none",
            *extra,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_serve_then_train_collects_and_evaluates(tmp_path, connect4_server):
    """The collector drives the served envs; evaluation gets its own server (not `busy`)."""
    done = train_connect4(tmp_path, connect4_server)  # debug=tiny: env.num_envs=2
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-4000:]
    assert f"(the server at {connect4_server} hosts the collector's envs)" in log
    assert "final greedy evaluation" in log
    done = train_connect4(tmp_path, connect4_server)  # the server serves the next run too
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]


def test_serve_then_train_with_other_num_envs_is_one_clear_error(tmp_path, connect4_server):
    done = train_connect4(tmp_path, connect4_server, "env.num_envs=3")
    assert done.returncode == 2, (done.stdout + done.stderr)[-4000:]
    assert (
        f"meeple: error: the env server at {connect4_server} hosts num_envs=2 envs but this run "
        "has env.num_envs=3; they must be equal" in done.stderr
    )
    assert "Traceback" not in done.stderr


def test_train_with_no_server_at_the_address_is_one_clear_error(tmp_path):
    done = train_connect4(tmp_path, str(tmp_path / "nobody.sock"))
    assert done.returncode == 2, (done.stdout + done.stderr)[-4000:]
    assert f"meeple: error: transport.address={tmp_path / 'nobody.sock'}: no env server" in (
        done.stderr
    )
    assert "Traceback" not in done.stderr


def test_serving_on_a_port_in_use_is_one_clear_error(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        done = serve(tmp_path, "env=cartpole", "transport=http", f"transport.address={address}")
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.startswith(f"meeple: error: cannot serve at transport.address={address}:")
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
