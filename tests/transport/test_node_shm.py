"""The TypeScript server over shared memory (worker_threads, the N-API addon): the same Connect
Four traces as Python's server through meeple's unchanged ShmClient, and the faults Python's
server is tested against (tests/transport/test_faults.py) on the Node shm path."""

import os
import signal
import socket
import struct
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from meeple.envs.array import LocalStepper
from meeple.errors import ConfigError
from meeple.transport import protocol as P
from meeple.transport.client import RemoteEnv, connect
from meeple.transport.launch import STALE_SOCKET_S, default_folder
from meeple.transport.protocol import ErrorCode, MsgType, ProtocolError
from meeple.transport.shm import Segment
from meeple_connect4 import Connect4ArrayEnv
from tests.transport.attacks import hello, read_frame
from tests.transport.conftest import socket_path
from tests.transport.node import build, start
from tests.transport.test_faults import closed, expect_error, raw, send_junk
from tests.transport.traces import assert_same, play

# A one-seat game as a --game-module: observation [t], 4 actions, episodes of 5 steps; action
# FAIL_ACTION runs FAIL (throw: an env exception; process.exit: the worker thread dies).
GAME = """
exports.game = {
  name: "faulty", numSeats: 1, numActions: 4, obsShape: [1], info: [["t", "int32"]],
  create() {
    let t = 0;
    const g = {
      over: false, truncated: false,
      reset(seed) { t = 0; g.over = false; },
      viewSeat() { return 0; },
      toMove(seat) { return true; },
      writeMask(seat, mask) { mask.fill(1); mask[0] = t === 0 ? 0 : 1; },
      writeObs(seat, obs) { obs[0] = t; },
      info() { return { t }; },
      step(actions) {
        if (actions[0] === FAIL_ACTION) { FAIL; }
        t += 1;
        g.over = t >= 5;
      },
      reward(seat) { return 1; },
    };
    return g;
  },
};
"""


def game_module(tmp_path, fail: str) -> str:
    path = tmp_path / f"game{len(list(tmp_path.iterdir()))}.js"
    path.write_text(GAME.replace("FAIL_ACTION", "3").replace("FAIL", fail))
    return str(path)


@pytest.fixture(scope="module")
def dist():
    return build()


def expected_traces():
    class Multi(LocalStepper):
        def step_multi(self, actions):
            out = self.spaces.new_records(10).reshape(5, 2)
            self.env.step_multi(actions, out)
            return out

    return (
        play(LocalStepper(Connect4ArrayEnv(5)), steps=80),
        play(Multi(Connect4ArrayEnv(5)), steps=60, multi=True),
    )


@pytest.mark.parametrize(
    "transport,workers", [("shm", 1), ("shm", 2), ("socket", 2), ("http", 2)], ids=str
)
def test_node_workers_play_the_same_traces(dist, transport, workers):
    """shm through meeple's ShmClient; socket/HTTP frames through the main thread's driver."""
    expected, expected_multi = expected_traces()
    server = start(dist, transport, num_envs=5, num_workers=workers)
    try:
        client = connect(transport, server.address, timeout_s=10)
        assert client.spaces == Connect4ArrayEnv(5).spaces
        assert_same(expected, play(client, steps=80), f"node {transport} w{workers}")
        assert_same(
            expected_multi,
            play(client, steps=60, multi=True),
            f"node {transport} w{workers} STEP_MULTI",
        )
        health = client.health()
        assert (health["steps"], health["num_workers"]) == (5 * 140, workers)
        assert health["env_errors"] == 0
        client.reset(None)
        with pytest.raises(ProtocolError, match=r"action 9 at position 0 is out of range") as err:
            client.step(np.array([9, 0, 0, 0, 0]))
        assert err.value.code == ErrorCode.BAD_ACTION
        # each worker checks its own slots (as in meeple's server): the others' envs stepped
        client.reset(None)
        assert client.step(np.full(5, 3))["info_moves"].tolist() == [1] * 5  # served after it
        client.close()
        env = RemoteEnv(connect(transport, server.address, timeout_s=10))
        assert env.reset()["action_mask"].all()
        env.close()
    finally:
        server.stop()


def test_observe_all_seats_over_shm_and_socket(dist):
    """OBSERVE with "all seats" (slot flags bit 1 / a 1-byte body 1): a record per seat, each from
    that seat's point of view, as STEP_MULTI returned them (reward and done 0)."""
    server = start(dist, "shm", num_envs=3, num_workers=2)
    try:
        client = connect("shm", server.address, timeout_s=10)
        channel, seg = client.channel, client.channel.segment
        client.reset(5)
        for t in range(3):
            multi = np.array(client.step_multi(np.full((3, 2), t + 1)))
        seg.slots["flags"] = 2
        channel.request(MsgType.OBSERVE)
        seen = seg.records
        for key in ("obs", "mask", "info_to_play", "info_moves", "info_winner"):
            np.testing.assert_array_equal(seen[key], multi[key], err_msg=key)
        assert not seen["reward"].any() and not seen["done"].any()
        assert not (seen["mask"][:, 0].any(axis=1) & seen["mask"][:, 1].any(axis=1)).any()
        seg.slots["flags"] = 0
        client.close()
        socket_client = connect("socket", server.address, timeout_s=10)  # the control socket
        reply = socket_client.call(MsgType.OBSERVE, b"\x01")
        again = socket_client.spaces.decode_records(reply, 6).reshape(3, 2)
        np.testing.assert_array_equal(again["obs"], multi["obs"])
        np.testing.assert_array_equal(again["mask"], multi["mask"])
        per_env = socket_client.observe()
        assert per_env.shape == (3,)
        with pytest.raises(ProtocolError, match="OBSERVE body is 2 bytes"):
            socket_client.call(MsgType.OBSERVE, b"\x01\x00")
        socket_client.close()
    finally:
        server.stop()


def test_shm_errors_come_back_through_the_slots(dist, tmp_path):
    failing = game_module(tmp_path, "throw new Error('action 3 is configured to fail')")
    server = start(dist, "shm", num_envs=2, game_module=failing)
    try:
        client = connect("shm", server.address, timeout_s=10)
        seg = client.channel.segment
        with pytest.raises(ProtocolError, match="STEP before RESET; send RESET first") as err:
            client.step(np.array([1, 1]))  # the client's own check (protocol.md: not_ready)
        assert err.value.code == ErrorCode.NOT_READY
        client.channel._reset = True  # past that check: the server's worker answers the same
        with pytest.raises(ProtocolError, match="STEP before RESET; send RESET first") as err:
            client.step(np.array([1, 1]))
        assert err.value.code == ErrorCode.NOT_READY
        assert seg.slots["status"].tolist() == [ErrorCode.NOT_READY] * 2
        client.reset(0)
        assert seg.slots["status"].tolist() == [0, 0], "an ok request clears the status"
        with pytest.raises(ProtocolError, match="action 9 at position 1 is out of range; accepted"):
            client.step(np.array([1, 9]))
        with pytest.raises(ProtocolError, match=r"illegal for env 1; legal actions: \[1, 2, 3\]"):
            client.step(np.array([1, 0]))
        with pytest.raises(ProtocolError, match=r"slot command 77 is not an env command") as err:
            client.channel.request(77)
        assert err.value.code == ErrorCode.UNKNOWN_TYPE
        assert client.step(np.array([1, 1]))["obs"][:, 0].tolist() == [1, 1]
        with pytest.raises(
            ProtocolError, match="raised Error: action 3 is configured to fail; they were reset"
        ) as err:
            client.step(np.array([3, 2]))
        assert err.value.code == ErrorCode.ENV_EXCEPTION
        assert client.health()["env_errors"] == 1
        assert client.observe()["obs"][:, 0].tolist() == [0, 0], "the faulty envs restarted"
        assert client.step(np.array([1, 1]))["obs"][:, 0].tolist() == [1, 1]
        client.close()
    finally:
        server.stop()


def test_one_driver_and_a_killed_client_releases_the_envs(dist):
    server = start(dist, "shm", num_envs=4, num_workers=2)
    try:
        script = textwrap.dedent(
            f"""
            import numpy as np
            from meeple.transport.protocol import MsgType, decode_name
            from meeple.transport.shm import ShmChannel
            from meeple.transport.socket import SocketClient
            # meeple.transport.client.ShmClient without its torch import (a second of startup)
            control = SocketClient({server.address!r}, 10)
            channel = ShmChannel(decode_name(control.call(MsgType.SHM_ATTACH)))
            r = channel.reset(0)
            print("attached", flush=True)
            while True:
                r = channel.step(r["mask"].argmax(axis=1).astype(np.int32))
            """
        )
        proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout.readline().strip() == "attached"
            other = connect("socket", server.address, timeout_s=10)
            assert other.health()["clients"] == 2  # HEALTH is always answered
            with pytest.raises(ProtocolError, match="another client drives these envs") as err:
                other.reset(1)
            assert err.value.code == ErrorCode.BUSY
            with pytest.raises(ProtocolError, match="another client drives these envs"):
                connect("shm", server.address, timeout_s=10)  # SHM_ATTACH: busy too
            time.sleep(0.2)  # let it step a while, then kill it mid-loop
        finally:
            proc.kill()
            proc.wait()
        deadline = time.monotonic() + 5
        while True:  # the server sees the control socket close and frees the envs
            try:
                fresh = connect("shm", server.address, timeout_s=10)
                break
            except ProtocolError as err:
                assert err.code == ErrorCode.BUSY and time.monotonic() < deadline
                time.sleep(0.05)
        assert fresh.reset(3)["mask"].all()
        assert fresh.step(np.arange(4))["info_moves"].tolist() == [1] * 4
        fresh.close()
        other.close()
    finally:
        server.stop()


def test_killed_node_server_gives_a_clear_error_not_a_hang(dist):
    server = start(dist, "shm", num_envs=2, num_workers=2)
    client = connect("shm", server.address, timeout_s=20)
    r = client.reset(0)
    segment = f"/dev/shm/{client.channel.segment.name}"
    os.kill(server.proc.pid, signal.SIGKILL)
    server.proc.wait()
    start_t = time.monotonic()
    with pytest.raises(ProtocolError, match="gone|died|shutting down"):
        for _ in range(100_000):
            r = client.step(r["mask"].argmax(axis=1).astype(np.int32))
            assert time.monotonic() - start_t < 10
    assert time.monotonic() - start_t < 10
    client.close()
    assert os.path.exists(segment) and os.path.exists(server.address), "SIGKILL leaves both"
    # a new server on the same address removes the dead one's socket file and segment
    again = start(dist, "shm", num_envs=2, address=server.address)
    try:
        with pytest.raises(ConfigError, match="exited with code 2 before it was ready"):
            start(dist, "shm", num_envs=2, address=server.address)  # a live one is refused
        fresh = connect("shm", again.address, timeout_s=10)
        assert fresh.channel.segment.name == os.path.basename(segment)
        assert fresh.reset(0)["mask"].all()
        fresh.close()
    finally:
        again.stop()


def test_a_dying_worker_thread_shuts_the_server_down_loudly(dist, tmp_path):
    address = socket_path()
    cmd = ["node", str(dist / "server.js"), "--transport", "shm", "--address", address]
    cmd += ["--num-envs", "2", "--num-workers", "2"]
    cmd += ["--game-module", game_module(tmp_path, "process.exit(3)")]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().startswith("MEEPLE_SERVER_READY")
        client = connect("shm", address, timeout_s=20)
        segment = f"/dev/shm/{client.channel.segment.name}"
        client.reset(0)
        with pytest.raises(ProtocolError, match="shutting down|died"):
            client.step(np.array([1, 3]))
        assert proc.wait(timeout=20) == 1
        err = proc.stderr.read()
        assert "meeple-node: error: env worker 1 (thread" in err, err
        assert "exited with code 3; the env server at" in err, err
        assert not os.path.exists(address) and not os.path.exists(segment)
        client.control.sock.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_remove_socket_file_and_segment(dist, sig):
    server = start(dist, "shm", num_envs=4, num_workers=2)
    client = connect("shm", server.address, timeout_s=10)
    client.reset(0)
    segment = f"/dev/shm/{client.channel.segment.name}"
    assert os.stat(segment).st_mode & 0o777 == 0o600
    assert os.stat(server.address).st_mode & 0o777 == 0o600
    server.proc.send_signal(sig)  # with a client still attached
    assert server.proc.wait(timeout=10) == 0
    assert not os.path.exists(server.address), "socket file left behind"
    assert not os.path.exists(segment), "shared-memory segment left in /dev/shm"
    with pytest.raises(ProtocolError, match="shutting down|died"):
        client.step(np.zeros(4, dtype=np.int32))
    client.channel.close()
    client.control.sock.close()


def test_node_server_sweeps_what_dead_servers_left(dist):
    dead = subprocess.Popen(["true"])
    dead.wait()
    name = f"meeple-nodestale{os.getpid()}"
    seg = Segment.create(name, P.Spaces(1, 2, (1,)), 1)
    struct.pack_into("<I", seg.mm, 32, dead.pid)  # server_pid: a process that is gone
    seg.close()
    stale = os.path.join(default_folder(), f"nodestale-{os.getpid()}.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(stale)
    s.close()
    old = time.time() - STALE_SOCKET_S - 5
    os.utime(stale, (old, old))
    server = start(dist, "socket", num_envs=1)
    server.stop()
    assert not os.path.exists(f"/dev/shm/{name}") and not os.path.exists(stale)


@pytest.fixture(scope="module")
def fuzzed(dist):
    """A Node shm server with a driving shm client, and a short frame timeout."""
    extra = ["--frame-timeout-ms", "300", "--max-body", "256"]
    server = start(dist, "shm", num_envs=2, num_workers=2, extra=extra)
    client = connect("shm", server.address, timeout_s=10)
    records = client.reset(0)
    yield server
    try:
        records = client.step(records["mask"].argmax(axis=1).astype(np.int32))
        assert records["info_moves"].tolist() == [1, 1]
        deadline = time.monotonic() + 5
        while client.health()["clients"] > 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.health()["clients"] == 1, "fuzz connections leaked"
        client.close()
    finally:
        server.stop()


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(junk=st.binary(min_size=0, max_size=64), hello_first=st.booleans())
def test_fuzz_random_bytes_on_the_control_socket(fuzzed, junk, hello_first):
    send_junk(fuzzed.address, junk, hello_first)


def test_malformed_control_frames_cost_only_their_connection(fuzzed):
    s = raw(fuzzed.address)
    s.sendall(P.encode_frame(MsgType.SHM_ATTACH, 2))
    expect_error(s, ErrorCode.NOT_READY, "SHM_ATTACH before HELLO")
    hello(s)
    s.sendall(P.encode_frame(MsgType.SHM_ATTACH, 3))
    expect_error(s, ErrorCode.BUSY, "another client drives these envs")
    s.sendall(P.encode_frame(MsgType.HEALTH, 4))
    assert read_frame(s)[0] == MsgType.HEALTH
    s.sendall(P.HEADER.pack(MsgType.STEP, 5, 10_000))
    expect_error(s, ErrorCode.TOO_LARGE, "exceeds the server maximum 256")
    assert closed(s)
    stalled = []
    for cut in (3, 9 + 4):  # a header cut short; a body cut short; then silence
        t = raw(fuzzed.address)
        hello(t)
        t.sendall((P.HEADER.pack(MsgType.STEP, 6, 8) + b"\0" * 8)[:cut])
        stalled.append(t)
    for t in stalled:  # the frame timeout (300 ms), not the client, ends them
        expect_error(t, ErrorCode.MALFORMED, "truncated frame")
        assert closed(t)
