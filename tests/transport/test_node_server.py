"""The TypeScript server: golden frames both ways, and the same Connect Four traces as Python's."""

import json
import os
import signal
import socket
import stat
import subprocess

import numpy as np
import pytest

from meeple.envs.array import LocalStepper
from meeple.transport import protocol as P
from meeple.transport.client import RemoteEnv, connect
from meeple.transport.protocol import ErrorCode, ProtocolError
from meeple_connect4 import Connect4ArrayEnv
from tests.transport import golden
from tests.transport.node import build, start
from tests.transport.traces import assert_same, play


@pytest.fixture(scope="module")
def dist():
    return build()


FRAMES = json.loads((golden.DATA / "frames.json").read_text())


def test_manifest_is_current():
    assert golden.manifest() == FRAMES, (
        "run python -m tests.transport.golden (and the TypeScript writer)"
    )


@pytest.mark.parametrize("frame", FRAMES, ids=[f["name"] for f in FRAMES])
def test_python_reads_and_writes_both_golden_sets(frame):
    ours = P.encode_frame(frame["msg_type"], frame["msg_id"], golden.encode_body(frame))
    for who in ("python", "ts"):
        data = (golden.DATA / who / f"{frame['name']}.bin").read_bytes()
        assert ours == data, f"{who}/{frame['name']}.bin differs from Python's encoding"
        msg_type, msg_id, body = P.decode_frame(data)
        assert (msg_type, msg_id) == (frame["msg_type"], frame["msg_id"])
        assert golden.decode_body(frame, body) == golden.expected_decoded(frame)


def test_typescript_reads_and_writes_both_golden_sets(dist, tmp_path):
    done = subprocess.run(
        ["node", str(dist / "golden.js"), "check", str(golden.DATA)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr + done.stdout
    assert "15 golden frames x 2 encoders checked, 0 problems" in done.stdout
    (tmp_path / "frames.json").write_text((golden.DATA / "frames.json").read_text())
    subprocess.run(["node", str(dist / "golden.js"), "write", str(tmp_path)], check=True)
    for frame in FRAMES:  # the committed ts/ set is what the TypeScript encoder writes today
        assert (tmp_path / "ts" / f"{frame['name']}.bin").read_bytes() == (
            golden.DATA / "ts" / f"{frame['name']}.bin"
        ).read_bytes()


@pytest.mark.parametrize("transport", ["socket", "http"])
def test_typescript_server_plays_the_same_traces(dist, transport):
    expected = play(LocalStepper(Connect4ArrayEnv(5)), steps=80)

    class Multi(LocalStepper):
        def step_multi(self, actions):
            out = self.spaces.new_records(10).reshape(5, 2)
            self.env.step_multi(actions, out)
            return out

    expected_multi = play(Multi(Connect4ArrayEnv(5)), steps=60, multi=True)
    server = start(dist, transport, num_envs=5)
    try:
        client = connect(transport, server.address, timeout_s=10)
        assert client.spaces == Connect4ArrayEnv(5).spaces
        assert_same(expected, play(client, steps=80), f"node {transport}")
        assert_same(
            expected_multi, play(client, steps=60, multi=True), f"node {transport} STEP_MULTI"
        )
        client.reset(None)
        with pytest.raises(ProtocolError, match=r"action 9 at position 0 is out of range") as err:
            client.step(np.array([9, 0, 0, 0, 0]))
        assert err.value.code == ErrorCode.BAD_ACTION
        assert client.health()["steps"] == 5 * 140
        client.close()
        env = RemoteEnv(connect(transport, server.address, timeout_s=10))
        td = env.reset()
        assert td["action_mask"].all()
        env.close()
    finally:
        server.stop()


def test_typescript_server_socket_is_private_and_removed_on_sigterm(dist):
    server = start(dist, "socket", num_envs=1)
    assert stat.S_IMODE(os.stat(server.address).st_mode) == 0o600
    client = connect("socket", server.address)
    with pytest.raises(ProtocolError, match="no shm"):
        client.call(P.MsgType.SHM_ATTACH)
    client.close()
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=10) == 0
    assert not os.path.exists(server.address)


def test_typescript_server_answers_bad_frames_and_keeps_serving(dist):
    from tests.transport.attacks import hello
    from tests.transport.test_faults import closed, expect_error, raw

    server = start(dist, "socket", num_envs=2)
    try:
        client = connect("socket", server.address, timeout_s=10)
        client.reset(None)
        s = raw(server.address)
        s.sendall(P.encode_frame(77, 3))
        expect_error(s, ErrorCode.UNKNOWN_TYPE, "msg_type 77 is unknown")
        s.sendall(P.encode_frame(P.MsgType.HELLO, 4, b"XXXX\x01\x00"))
        expect_error(s, ErrorCode.MALFORMED, "HELLO magic")
        assert closed(s)
        s = raw(server.address)
        s.sendall(P.encode_frame(P.MsgType.HELLO, 5, P.encode_hello_request(99)))
        expect_error(
            s, ErrorCode.VERSION, "client speaks protocol version 99; this server speaks 1"
        )
        hello(s)
        s.sendall(P.HEADER.pack(P.MsgType.STEP, 6, 2**31))
        expect_error(s, ErrorCode.TOO_LARGE, "exceeds the server maximum")
        assert closed(s)
        s = raw(server.address)
        hello(s)
        s.sendall(P.HEADER.pack(P.MsgType.STEP, 7, 8) + b"\0\0")
        s.shutdown(socket.SHUT_WR)
        expect_error(s, ErrorCode.MALFORMED, "truncated frame")
        with pytest.raises(ProtocolError, match=r"action 7 at position 1 is out of range"):
            client.step(np.array([0, 7]))
        assert client.step(np.array([0, 1]))["info_moves"].tolist() == [1, 1]
        client.close()
    finally:
        server.stop()
