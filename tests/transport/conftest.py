"""Env servers started in the test process (socket, HTTP; shm with worker processes)."""

from __future__ import annotations

import contextlib
import itertools
import os
import tempfile

import pytest

from meeple.transport.client import connect
from meeple.transport.server import EnvServer

COUNTER = {"array_env": "meeple.envs.counter:CounterEnv", "kwargs": {"episode_length": 5}}
FAULTY = {
    "array_env": "meeple.envs.counter:CounterEnv",
    "kwargs": {"episode_length": 5, "fail_action": 3},
}
CONNECT4 = {"backend": "connect4"}
_ids = itertools.count()


def socket_path() -> str:
    folder = os.path.join(tempfile.gettempdir(), f"meeple-test-{os.getuid()}")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return os.path.join(folder, f"t{os.getpid()}-{next(_ids)}.sock")


@contextlib.contextmanager
def serving(env_cfg: dict, transport: str, num_envs: int = 4, num_workers: int = 0, **kwargs):
    address = "127.0.0.1:0" if transport == "http" else socket_path()
    server = EnvServer(
        env_cfg,
        transport=transport,
        address=address,
        num_envs=num_envs,
        num_workers=num_workers,
        **kwargs,
    ).start()
    try:
        yield server
    finally:
        server.close()


@contextlib.contextmanager
def client_for(server: EnvServer, timeout_s: float = 10.0):
    client = connect(server.transport, server.address, timeout_s=timeout_s)
    try:
        yield client
    finally:
        client.close()


# (transport, num_workers) of every way a Python server can run; "shm-python": shm without
# its native hot loops (meeple_native.shm), the path of installs that lack them
SETUPS = [("socket", 0), ("socket", 2), ("shm", 1), ("shm", 2), ("shm-python", 1), ("http", 0)]


def transport_of(name: str, monkeypatch) -> str:
    """The transport of a setup name ("shm-python": shm told not to use native code)."""
    if name == "shm-python":  # read by the client here and by the spawned workers
        monkeypatch.setenv("MEEPLE_NATIVE_SHM", "0")
        return "shm"
    return name


@pytest.fixture(params=SETUPS, ids=[f"{t}-w{w}" for t, w in SETUPS])
def setup(request, monkeypatch):
    transport, workers = request.param
    return transport_of(transport, monkeypatch), workers
