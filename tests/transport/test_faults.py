"""Bad input and faults: each costs only its own request or connection, never the server."""

import contextlib
import itertools
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from meeple.transport import protocol as P
from meeple.transport.client import connect
from meeple.transport.launch import READY, ServerProcess
from meeple.transport.protocol import ErrorCode, MsgType, ProtocolError
from meeple.transport.shm import pid_alive
from tests.transport.attacks import hello, read_frame
from tests.transport.conftest import (
    COUNTER,
    FAULTY,
    client_for,
    serving,
    socket_path,
    transport_of,
)


def raw(address: str) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(address)
    return s


def expect_error(s: socket.socket, code: ErrorCode, text: str) -> None:
    msg_type, _, body = read_frame(s)
    assert msg_type == MsgType.ERROR
    err = P.decode_error(body)
    assert err.code == code and text in err.text, err


def closed(s: socket.socket) -> bool:
    try:
        return s.recv(1) == b""
    except (ConnectionResetError, TimeoutError):
        return True


@pytest.fixture
def driven():
    """A socket server with one healthy client driving its envs."""
    with serving(COUNTER, "socket", num_envs=2, max_body=1024, frame_timeout_s=1.0) as server:
        with client_for(server) as client:
            client.reset(0)
            yield server, client


def send_junk(address: str, junk: bytes, hello_first: bool) -> None:
    """Send ``junk`` (after HELLO if asked) and read until the server ends this connection."""
    s = raw(address)
    s.settimeout(2)
    try:
        if hello_first:
            hello(s)
        s.sendall(junk)
        s.shutdown(socket.SHUT_WR)
        while s.recv(4096):  # whatever it answers, it must end this connection
            pass
    except (ConnectionError, TimeoutError):
        pass
    finally:
        s.close()


def keeps_serving(client) -> None:
    r = client.observe()
    client.step(np.where(r["mask"][:, 1] == 1, 1, 2))


def test_truncated_frames_drop_only_that_connection(driven):
    server, client = driven
    s = raw(server.address)
    hello(s)
    s.sendall(P.HEADER.pack(MsgType.STEP, 9, 20) + b"\0" * 5)
    s.shutdown(socket.SHUT_WR)
    expect_error(s, ErrorCode.MALFORMED, "truncated frame")
    assert closed(s)
    s = raw(server.address)
    s.sendall(b"\x01\x02\x03\x04\x05")  # half a header
    s.shutdown(socket.SHUT_WR)
    expect_error(s, ErrorCode.MALFORMED, "5 of 9 bytes of the frame header")
    s = raw(server.address)  # header, then a stalled body: the frame timeout ends it
    hello(s)
    s.sendall(P.HEADER.pack(MsgType.STEP, 9, 8) + b"\0\0")
    expect_error(s, ErrorCode.MALFORMED, "truncated frame")
    keeps_serving(client)


def test_a_stalled_header_times_out_and_closes_only_that_connection(driven):
    server, client = driven
    s = raw(server.address)
    hello(s)
    s.sendall(P.HEADER.pack(MsgType.STEP, 9, 8)[:3])  # 3 bytes of a header, then silence
    keeps_serving(client)  # served while that connection stalls
    expect_error(s, ErrorCode.MALFORMED, "3 of 9 header bytes within 1.0 s")
    assert closed(s)
    keeps_serving(client)


def test_unknown_type_version_and_size_errors(driven):
    server, client = driven
    s = raw(server.address)
    s.sendall(P.encode_frame(77, 3, b""))
    expect_error(s, ErrorCode.UNKNOWN_TYPE, "msg_type 77 is unknown; accepted: HELLO(1)")
    s.sendall(P.encode_frame(MsgType.SPACES, 4))
    expect_error(s, ErrorCode.NOT_READY, "SPACES before HELLO")
    s.sendall(P.encode_frame(MsgType.HELLO, 5, struct.pack("<IH", P.MAGIC, 99)))
    expect_error(s, ErrorCode.VERSION, "client speaks protocol version 99; this server speaks 1")
    hello(s)  # the connection survived all three
    s.sendall(P.HEADER.pack(MsgType.STEP, 6, 10_000))
    expect_error(s, ErrorCode.TOO_LARGE, "body_len 10000 exceeds the server maximum 1024")
    assert closed(s)
    s = raw(server.address)
    hello(s)
    s.sendall(P.encode_frame(MsgType.STEP, 7, b"\0" * 4))
    expect_error(s, ErrorCode.MALFORMED, "STEP body is 4 bytes; expected 8 (2 int32 actions)")
    keeps_serving(client)
    assert server.health()["bad_requests"] >= 5


@pytest.mark.parametrize(
    "transport,workers", [("socket", 0), ("shm", 1), ("shm-python", 1), ("http", 0)]
)
def test_bad_actions_get_clear_errors(transport, workers, monkeypatch):
    transport = transport_of(transport, monkeypatch)
    with (
        serving(COUNTER, transport, num_envs=2, num_workers=workers) as server,
        client_for(server) as client,
    ):
        with pytest.raises(ProtocolError, match="STEP before RESET") as err:
            client.step(np.array([1, 1]))
        assert err.value.code == ErrorCode.NOT_READY
        client.reset(0)
        with pytest.raises(
            ProtocolError, match="action 9 at position 1 is out of range; accepted 0..3"
        ):
            client.step(np.array([1, 9]))
        with pytest.raises(
            ProtocolError, match=r"action 0 is illegal for env 1; legal actions: \[1, 2, 3\]"
        ):
            client.step(np.array([1, 0]))
        assert client.step(np.array([1, 1]))["obs"][:, 0].tolist() == [1, 1]


@pytest.mark.parametrize(
    "transport,workers", [("socket", 0), ("shm", 1), ("shm-python", 1), ("http", 0)]
)
def test_env_exception_is_reported_counted_and_the_env_reset(transport, workers, monkeypatch):
    transport = transport_of(transport, monkeypatch)
    with (
        serving(FAULTY, transport, num_envs=2, num_workers=workers) as server,
        client_for(server) as client,
    ):
        client.reset(0)
        client.step(np.array([1, 2]))
        with pytest.raises(
            ProtocolError,
            match="raised RuntimeError: action 3 is configured to fail; they were reset",
        ) as err:
            client.step(np.array([3, 2]))
        assert err.value.code == ErrorCode.ENV_EXCEPTION
        assert client.health()["env_errors"] == 1
        r = client.observe()
        assert r["obs"][:, 0].tolist() == [0, 0], "the faulty envs restarted"
        assert client.step(np.array([1, 1]))["obs"][:, 0].tolist() == [1, 1]


def test_one_driver_at_a_time_and_disconnect_mid_step_releases(driven):
    server, client = driven
    with client_for(server) as other:
        assert other.health()["clients"] == 2  # HEALTH is always answered
        with pytest.raises(ProtocolError, match="another client drives these envs") as err:
            other.reset(1)
        assert err.value.code == ErrorCode.BUSY
    s = raw(server.address)
    hello(s)
    client.close()  # the driver leaves: the envs are free
    s.sendall(P.encode_frame(MsgType.RESET, 2, P.encode_reset(3)))
    assert read_frame(s)[0] == MsgType.RESET
    s.sendall(P.encode_frame(MsgType.STEP, 3, P.encode_actions(np.array([1, 1]))))
    s.close()  # gone before reading the reply
    deadline = time.monotonic() + 5
    with client_for(server) as fresh:
        while True:  # the server notices the disconnect and frees the envs
            try:
                fresh.reset(4)
                break
            except ProtocolError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        keeps_serving(fresh)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(junk=st.binary(min_size=0, max_size=64), hello_first=st.booleans())
def test_fuzz_random_bytes_never_crash_or_leak(fuzz_server, junk, hello_first):
    send_junk(fuzz_server.address, junk, hello_first)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    frames=st.lists(
        st.tuples(st.sampled_from(list(MsgType)), st.binary(max_size=24)), min_size=1, max_size=3
    ),
    cut=st.integers(1, 60),
)
def test_fuzz_frames_cut_short_then_silence_are_timed_out(fuzz_server, frames, cut):
    """Valid-looking frames cut anywhere, and the client stays connected: the frame timeout
    (not the client) must end the connection."""
    chunks = [P.encode_frame(MsgType.HELLO, 1, P.encode_hello_request())]
    chunks += [P.encode_frame(t, i, body) for i, (t, body) in enumerate(frames, 2)]
    data = b"".join(chunks)
    end = len(data) - cut % len(data)
    assume(end not in itertools.accumulate(map(len, chunks)))  # whole frames may idle forever
    s = raw(fuzz_server.address)
    s.settimeout(10)
    try:
        s.sendall(data[:end])
        while s.recv(4096):
            pass
    except (ConnectionError, TimeoutError) as err:
        assert not isinstance(err, TimeoutError), "a stalled frame was never timed out"
    finally:
        s.close()


@pytest.fixture(scope="module")
def fuzz_server():
    with serving(COUNTER, "socket", num_envs=2, max_body=256, frame_timeout_s=0.5) as server:
        threads = threading.active_count()
        yield server
        with client_for(server) as client:
            client.reset(0)
            keeps_serving(client)
            deadline = time.monotonic() + 5
            while client.health()["clients"] > 1 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert client.health()["clients"] == 1, "fuzz connections leaked"
        assert threading.active_count() <= threads + 2


@pytest.mark.parametrize("transport", ["socket", "shm"])
def test_killed_server_gives_a_clear_error_not_a_hang(transport):
    server = ServerProcess(
        COUNTER, transport=transport, num_envs=2, num_workers=1 if transport == "shm" else 0
    )
    client = connect(transport, server.address, timeout_s=20)
    client.reset(0)
    workers = list(client.channel._pids) if transport == "shm" else []
    os.kill(server.proc.pid, signal.SIGKILL)
    server.proc.wait()
    start = time.monotonic()
    with pytest.raises(ProtocolError, match="gone|died|shutting down"):
        for t in range(100_000):  # an orphaned shm worker may answer until it notices
            client.step(np.full(2, (t % 5 + 1) % 4))  # counter t = steps % 5 (episodes of 5)
            assert time.monotonic() - start < 10
    assert time.monotonic() - start < 10
    deadline = time.monotonic() + 10
    while any(pid_alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(pid_alive(p) for p in workers), "workers outlive a killed server"
    client.close()
    # a new server on the same address recovers the stale socket file and segment
    again = ServerProcess(
        COUNTER,
        transport=transport,
        num_envs=2,
        num_workers=1 if transport == "shm" else 0,
        address=server.address,
    )
    with client_for_address(transport, again.address) as fresh:
        fresh.reset(0)
    again.stop()


class client_for_address:
    def __init__(self, transport, address):
        self.client = connect(transport, address, timeout_s=10)

    def __enter__(self):
        return self.client

    def __exit__(self, *exc):
        self.client.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_remove_socket_file_segment_and_workers(sig):
    address = socket_path()
    server = ServerProcess(COUNTER, transport="shm", num_envs=4, num_workers=2, address=address)
    client = connect("shm", server.address)
    client.reset(0)
    segment = f"/dev/shm/{client.channel.segment.name}"
    workers = list(client.channel._pids)
    assert os.path.exists(segment) and os.path.exists(address) and all(map(pid_alive, workers))
    client.close()
    server.proc.send_signal(sig)
    assert server.proc.wait(timeout=20) == 0
    assert not os.path.exists(address), "socket file left behind"
    assert not os.path.exists(segment), "shared-memory segment left in /dev/shm"
    assert not any(pid_alive(p) for p in workers)


@pytest.mark.parametrize("transport", ["shm", "socket"])
def test_a_killed_worker_shuts_the_server_down_loudly_and_is_reaped(transport, caplog):
    with serving(COUNTER, transport, num_envs=4, num_workers=2) as server:
        client = connect(transport, server.address, timeout_s=20)
        client.reset(0)
        victim = server.slots.procs[1].pid
        os.kill(victim, signal.SIGKILL)
        with pytest.raises(ProtocolError, match=rf"worker 1 \(pid {victim}\) died|gone"):
            for t in range(100_000):
                client.step(np.full(4, (t % 5 + 1) % 4))
        deadline = time.monotonic() + 20
        while server.failure is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.failure.startswith(f"env worker 1 (pid {victim}) was killed by SIGKILL")
        assert f"env worker 1 (pid {victim}) was killed by SIGKILL" in caplog.text
        assert not os.path.exists(f"/proc/{victim}"), "the dead worker is left a zombie"
        assert not any(pid_alive(p.pid) for p in server.slots.procs), "workers outlive it"
        with pytest.raises(ConnectionError, match="cannot connect"):
            connect(transport, server.address, timeout_s=5)  # later clients: refused at once
        with contextlib.suppress(Exception):
            client.close()


def test_python_m_meeple_serve_exits_naming_a_killed_worker():
    address = socket_path()
    cmd = [sys.executable, "-m", "meeple.serve", "--env-json", json.dumps(COUNTER)]
    cmd += ["transport=shm", f"transport.address={address}", "num_envs=4"]
    proc = subprocess.Popen(
        [*cmd, "transport.num_workers=2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().startswith(READY)
        client = connect("shm", address, timeout_s=20)
        client.reset(0)
        victim = client.channel._pids[0]
        os.kill(victim, signal.SIGKILL)
        assert proc.wait(timeout=60) == 1
        err = proc.stderr.read()
        line = f"meeple: error: env worker 0 (pid {victim}) was killed by SIGKILL; the env server"
        assert line in err and "Traceback" not in err, err
        assert not os.path.exists(address), "the socket file is removed"
        with pytest.raises(ProtocolError, match=f"worker 0 \\(pid {victim}\\) died"):
            client.step(np.full(4, 1))
        client.control.sock.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_new_server_sweeps_what_dead_servers_left():

    from meeple.transport.launch import STALE_SOCKET_S, default_folder
    from meeple.transport.protocol import Spaces
    from meeple.transport.shm import Segment

    dead = subprocess.Popen(["true"])
    dead.wait()
    name = f"meeple-teststale{os.getpid()}"
    seg = Segment.create(name, Spaces(1, 2, (1,)), 1)
    struct.pack_into("<I", seg.mm, 32, dead.pid)  # server_pid: a process that is gone
    seg.close()
    path = os.path.join(default_folder(), f"stale-{os.getpid()}.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.close()
    old = time.time() - STALE_SOCKET_S - 5
    os.utime(path, (old, old))
    young = os.path.join(default_folder(), f"young-{os.getpid()}.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(young)  # possibly a server starting right now: left alone
    s.close()
    with serving(COUNTER, "socket", num_envs=1):
        pass
    assert not os.path.exists(f"/dev/shm/{name}") and not os.path.exists(path)
    assert os.path.exists(young)
    os.unlink(young)


def test_a_server_that_cannot_start_is_one_clear_error(capfd):
    from meeple.errors import ConfigError

    with pytest.raises(
        ConfigError, match="socket env server exited with code 2 before it was ready"
    ):
        ServerProcess({"array_env": "no_such_module:Env"}, transport="socket", num_envs=1)
    assert "env.array_env='no_such_module:Env' cannot be loaded" in capfd.readouterr().err
