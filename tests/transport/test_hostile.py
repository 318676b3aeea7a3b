"""Slow, greedy and crowded clients (issue 41): none wedges a server, takes its memory or
shuts out the real client, and every mistake is one line.

Loopback and Unix sockets only; every loop is bounded in time. The attacks and the numbers
they gave are in docs/transport.md ("Hostile clients").
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from meeple.transport import protocol as P
from meeple.transport.client import connect
from meeple.transport.launch import READY
from meeple.transport.protocol import ErrorCode, MsgType, ProtocolError
from meeple.transport.socket import SocketClient
from tests.transport.attacks import drip_connections, hello, read_frame, rss_kib
from tests.transport.conftest import COUNTER, client_for, serving, socket_path
from tests.transport.test_faults import raw
from tests.transport.test_http_faults import post, read_response, tcp


def legal(records: np.ndarray) -> np.ndarray:
    """An action legal in every env (the counter envs' masks)."""
    return np.where(records["mask"][:, 1] == 1, 1, 2).astype(np.int32)


def ended(s: socket.socket) -> bool:
    """Whether the server answered or closed (without waiting)."""
    return bool(select.select([s], [], [], 0)[0])


# -- 1. slow drip: the frame timeout bounds the whole request ------------------------------------


@pytest.mark.parametrize("transport", ["socket", "http"])
def test_a_slow_drip_request_is_cut_at_the_frame_timeout(transport):
    """One byte every 0.2 s: each read is well inside the 1 s frame timeout, the request not."""
    with serving(COUNTER, transport, num_envs=2, frame_timeout_s=1.0) as server:
        if transport == "socket":
            s = raw(server.address)
            hello(s)
            request = P.encode_frame(MsgType.RESET, 2, P.encode_reset(1)) * 3
        else:
            s = tcp(server.address)
            request = post("/reset", b'{"seed": 1}' + b" " * 40)
        start = time.monotonic()
        try:
            for byte in request:
                if ended(s) or time.monotonic() - start > 4:
                    break
                try:
                    s.send(bytes([byte]))
                except (BrokenPipeError, ConnectionResetError):
                    break  # the server cut the connection between the check and the send
                time.sleep(0.2)
            cut_after = time.monotonic() - start
            assert cut_after < 2.5, f"a dripping request was served for {cut_after:.1f} s"
            if transport == "socket":
                msg_type, _, body = read_frame(s)
                assert msg_type == MsgType.ERROR
                err = P.decode_error(body)
                assert err.code == ErrorCode.MALFORMED and "frame timeout" in err.text, err
        finally:
            s.close()
        with client_for(server) as client:  # the server still serves
            client.reset(0)


# -- 2. bodies are buffered as they arrive, and in total at most 4 x max_body -------------------


def test_dripping_announced_bodies_do_not_take_server_memory():
    """200 connections announce 64 MiB bodies and send 1 KiB of each: the server's memory
    grows by what arrived, not by what was announced (12.5 GiB). The attack stops at the first
    batch that grew the server by more than 150 MiB (on the code before: the first)."""
    address = socket_path()
    cmd = [sys.executable, "-m", "meeple.serve", "--env-json", json.dumps(COUNTER)]
    cmd += ["transport=socket", f"transport.address={address}", "num_envs=2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().startswith(READY)
        before = rss_kib(proc.pid)
        grown = 0
        with drip_connections(address, 200, 64 << 20, 1024, batch=20) as batches:
            for opened in batches:
                time.sleep(0.2)  # let the server read what came
                grown = (rss_kib(proc.pid) - before) / 1024
                assert grown < 150, f"{opened} dripping connections grew the server {grown:.0f} MiB"
            assert proc.poll() is None
        with client_for_address(address) as client:
            client.reset(0)
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def client_for_address(address: str):
    from contextlib import closing

    return closing(connect("socket", address, timeout_s=10))


def test_unfinished_bodies_are_capped_in_total(caplog):
    """Greedy clients that send most of a body each: past 4 x max_body of unfinished bodies
    over all connections, the next is refused (too_large, connection closed)."""
    max_body = 1 << 20
    with serving(COUNTER, "socket", num_envs=2, max_body=max_body, frame_timeout_s=5.0) as server:
        socks, refused = [], 0
        try:
            for _ in range(8):
                s = raw(server.address)
                socks.append(s)
                hello(s)
                try:
                    s.sendall(P.HEADER.pack(MsgType.STEP, 2, max_body) + b"\0" * (900 << 10))
                except OSError:
                    pass  # refused and closed while it was still sending
                time.sleep(0.1)
                refused += ended(s)
        finally:
            for s in socks:
                s.close()
        assert refused == 4, "8 x 900 KiB of unfinished bodies against a 4 MiB total"
        assert "4194304 (4 x transport.max_body)" in caplog.text
        with client_for(server) as client:
            client.reset(0)


# -- 3. a client that hangs up costs no traceback ------------------------------------------------


def test_http_clients_that_hang_up_leave_no_traceback(capfd, caplog):
    with serving(COUNTER, "http", num_envs=2) as server:
        for i in range(20):
            s = tcp(server.address)
            s.sendall(post("/reset", b'{"seed": 1}'))
            if i % 2:  # RST at once (no FIN): the reply meets a reset connection
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")
            s.close()
        time.sleep(0.5)
        with client_for(server) as client:
            client.reset(0)
    err = capfd.readouterr().err
    assert "Traceback" not in err, err
    tracebacks = [r.getMessage() for r in caplog.records if r.exc_info]
    assert not tracebacks, tracebacks


def test_a_request_http_cannot_parse_gets_a_json_error():
    with serving(COUNTER, "http", num_envs=1) as server:
        s = tcp(server.address)
        s.sendall(b"GARBAGE\r\n\r\n")
        status, data = read_response(s)
        s.close()
    assert status == 400 and data["error"]["name"] == "malformed", data
    assert "accepted: GET /hello" in data["error"]["message"]


# -- 4. bursts: a full listen backlog is waited out within the client's timeout ------------------


def full_backlog(path: str) -> tuple[socket.socket, list[socket.socket]]:
    """A listener nobody accepts on, its backlog filled."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    fillers = []
    for _ in range(64):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect(path)
        except BlockingIOError:
            s.close()
            return listener, fillers
        fillers.append(s)
    raise AssertionError("the backlog never filled")


def test_a_client_waits_out_a_full_backlog_then_is_served():
    """The real server's connection is handed over once the burst has been accepted."""
    with serving(COUNTER, "socket", num_envs=2) as server:
        path = socket_path()
        listener, fillers = full_backlog(path)

        def accept_the_burst_then_serve() -> None:
            time.sleep(0.5)
            for _ in fillers:
                listener.accept()[0].close()
            conn, _ = listener.accept()
            server.frontend.serve(conn)

        thread = threading.Thread(target=accept_the_burst_then_serve, daemon=True)
        thread.start()
        try:
            start = time.monotonic()
            client = connect("socket", path, timeout_s=5)
            assert time.monotonic() - start >= 0.4
            client.reset(0)
            client.close()
        finally:
            for s in fillers:
                s.close()
            listener.close()
            os.unlink(path)
            thread.join(timeout=5)


def test_a_backlog_that_stays_full_is_one_timeout_line():
    path = socket_path()
    listener, fillers = full_backlog(path)
    try:
        start = time.monotonic()
        with pytest.raises(ConnectionError, match=r"did not accept the connection within 0.5 s"):
            SocketClient(path, timeout_s=0.5)
        assert time.monotonic() - start >= 0.45
    finally:
        for s in fillers:
            s.close()
        listener.close()
        os.unlink(path)


def test_listen_backlogs_hold_a_burst():
    for transport in ("socket", "http"):
        with serving(COUNTER, transport, num_envs=1) as server:
            assert server.frontend.backlog >= 1024


# -- 5. a corrupted segment is one clear error, within the timeout ------------------------------

# Run apart, under a 4 GiB address-space limit: on the code before, a slot count of 2**32 - 1
# built a list of 4 billion offsets (the test process would have taken the machine's memory).
CORRUPT = textwrap.dedent(
    """
    import json, mmap, os, resource, struct, sys
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
    from meeple.transport.shm import ShmChannel
    from meeple.transport.waiting import WaitPolicy
    name, cases = sys.argv[1], json.loads(sys.argv[2])
    fd = os.open("/dev/shm/" + name, os.O_RDWR)
    mm = mmap.mmap(fd, os.fstat(fd).st_size)
    for at, value in cases:
        (kept,) = struct.unpack_from("<I", mm, at)
        struct.pack_into("<I", mm, at, value)
        try:
            ShmChannel(name, WaitPolicy(timeout_s=5)).close()
        except Exception as err:
            print(type(err).__name__, err, flush=True)
        else:
            print("attached", flush=True)
        struct.pack_into("<I", mm, at, kept)
    """
)
CORRUPTIONS = [  # (byte offset, value, what the one line names)
    (64 + 76, 0xFFFFFFFF, "worker 0 claims slots 0..4294967294"),  # worker 0's num_slots
    (64 + 72, 3, "worker 0 claims slots 3..6"),  # its first_slot
    (40, 1 << 20, "num_workers=1048576 with num_envs=4"),
    (24, 8, "slot_size=8 (its SPACES imply"),
    (52, 1 << 30, "a SPACES block of 1073741824 bytes"),
]


def test_a_corrupted_segment_is_refused_at_connect():
    with serving(COUNTER, "shm", num_envs=4, num_workers=1) as server:
        cases = json.dumps([[at, value] for at, value, _ in CORRUPTIONS])
        out = subprocess.run(
            [sys.executable, "-c", CORRUPT, server.segment_name, cases],
            capture_output=True,
            text=True,
            timeout=60,
        )
        lines = out.stdout.splitlines()
        assert len(lines) == len(CORRUPTIONS), (out.stdout, out.stderr[-2000:])
        for line, (_, _, text) in zip(lines, CORRUPTIONS):
            assert line.startswith("ProtocolError") and text in line, line
            assert "corrupted or foreign segment" in line
        with client_for(server) as client:  # restored: attaches and serves
            client.reset(0)


# -- 6. not_ready for a connection that steps first; a timed-out client says so -----------------


@pytest.mark.parametrize("transport", ["socket", "http", "shm"])
def test_a_new_connection_that_steps_before_reset_is_not_ready(transport):
    workers = 1 if transport == "shm" else 0
    with serving(COUNTER, transport, num_envs=2, num_workers=workers) as server:
        with client_for(server) as first:
            first.step(legal(first.reset(0)))
        with client_for(server) as second:
            with pytest.raises(ProtocolError, match="before RESET") as err:
                second.step(np.ones(2, np.int32))
            assert err.value.code == ErrorCode.NOT_READY
            second.step(legal(second.reset(0)))


@pytest.mark.parametrize("transport", ["socket", "http"])
def test_a_client_that_timed_out_says_so_when_used_again(transport):
    with serving(COUNTER, transport, num_envs=2) as server:
        request, calls = server.slots.request, []

        def late(*args, **kwargs):  # the second request (the first STEP) answers late
            calls.append(1)
            if len(calls) == 2:
                time.sleep(0.6)
            return request(*args, **kwargs)

        server.slots.request = late
        client = connect(transport, server.address, timeout_s=0.3)
        actions = legal(client.reset(0))
        with pytest.raises(ProtocolError, match="did not answer"):
            client.step(actions)
        time.sleep(0.5)  # the late reply arrives meanwhile
        with pytest.raises(ProtocolError, match="timed out earlier") as err:
            client.step(actions)
        assert "connect again" in err.value.text and "\n" not in err.value.text
        client.close()


# -- 7. no lost wake-up: a client that rings as soon as a worker is ready is answered -----------


def test_a_ring_right_after_a_worker_is_ready_is_answered():
    """The worker publishes its pid (ready) only after it has read the doorbell it waits
    past; a ring in between was lost for good (protocol.md: the first request after connect
    unanswered). The test rings the moment the pid appears, several times over."""
    import multiprocessing as mp

    from meeple.envs.array import make_array_env
    from meeple.transport.shm import W_COUNT, W_DONE, W_DOORBELL, W_PID, Segment, worker_main
    from meeple.transport.waiting import WaitPolicy

    probe = make_array_env(COUNTER, 1)
    spaces = probe.spaces.with_num_envs(2)
    probe.close()
    ctx = mp.get_context("spawn")
    for attempt in range(4):
        name = f"meeple-testring{os.getpid()}-{attempt}"
        seg = Segment.create(name, spaces, 1)
        words = seg.words
        words[seg.word(0, W_COUNT)] = 2
        seg.slots["command"] = P.RESET
        proc = ctx.Process(target=worker_main, args=(name, 0, COUNTER, WaitPolicy()), daemon=True)
        proc.start()
        try:
            deadline = time.monotonic() + 60
            while not words[seg.word(0, W_PID)]:
                assert time.monotonic() < deadline and proc.is_alive()
            seg.slots["req_seq"] = 1
            words[seg.word(0, W_DOORBELL)] = 1  # the worker spins first: no wake needed
            deadline = time.monotonic() + 5
            while words[seg.word(0, W_DONE)] != 1:
                assert time.monotonic() < deadline, f"attempt {attempt}: the ring was lost"
                time.sleep(0.001)
        finally:
            seg.state = 2  # closing: the worker leaves its wait
            from meeple.transport.waiting import futex_wake

            futex_wake(seg.address(seg.word(0, W_DOORBELL)))
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
            seg.unlink()
            seg.close()
