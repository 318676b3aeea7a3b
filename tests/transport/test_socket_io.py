"""The socket transport's reads and writes: one system call per frame in the common case, and
every uncommon case (split, pipelined, oversized, stalled frames; slow servers) still right."""

import os
import socket
import threading

import numpy as np
import pytest

from meeple.transport import protocol as P
from meeple.transport.protocol import ErrorCode, MsgType, ProtocolError
from meeple.transport.socket import (
    BODY_AT,
    BadFrame,
    FrameReader,
    PeerClosed,
    SocketClient,
    recv_reply,
    send_frame,
)
from tests.transport.conftest import socket_path
from tests.transport.test_protocol import C4


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


def test_pipelined_and_split_frames_are_read_whole(pair):
    client, server = pair
    reader = FrameReader(server, timeout_s=2.0, capacity=64)
    client.sendall(P.encode_frame(MsgType.STEP, 1, b"abcd") + P.encode_frame(MsgType.HEALTH, 2))
    assert reader.frame(1024) == (MsgType.STEP, 1, b"abcd")
    assert reader.frame(1024) == (MsgType.HEALTH, 2, b"")
    frame = P.encode_frame(MsgType.STEP, 3, bytes(range(40)))
    client.sendall(frame[:5])  # a header split over two segments, then its body
    threading.Timer(0.05, client.sendall, (frame[5:],)).start()
    assert reader.frame(1024) == (MsgType.STEP, 3, bytes(range(40)))
    assert server.gettimeout() is None  # blocking again between frames


def test_a_body_larger_than_the_buffer_is_read_into_its_own(pair):
    client, server = pair
    reader = FrameReader(server, timeout_s=2.0, capacity=64)
    body = bytes(range(256)) * 40
    sender = threading.Thread(target=client.sendall, args=(P.encode_frame(5, 9, body),))
    sender.start()
    assert reader.frame(1 << 20) == (5, 9, body)
    sender.join()


def test_stalled_truncated_and_oversized_frames_are_bad_frames(pair):
    client, server = pair
    reader = FrameReader(server, timeout_s=0.2)
    client.sendall(P.HEADER.pack(MsgType.STEP, 7, 8) + b"\0\0")
    with pytest.raises(BadFrame, match="header announced 8 body bytes") as bad:
        reader.frame(1024)
    assert bad.value.msg_id == 7 and bad.value.error.code == ErrorCode.MALFORMED
    reader = FrameReader(server, timeout_s=0.2)
    client.sendall(P.HEADER.pack(MsgType.STEP, 8, 10_000))
    with pytest.raises(BadFrame, match="body_len 10000 exceeds the server maximum 1024") as bad:
        reader.frame(1024)
    assert bad.value.error.code == ErrorCode.TOO_LARGE
    reader = FrameReader(server, timeout_s=0.2)
    client.sendall(b"\1\2\3")
    client.shutdown(socket.SHUT_WR)
    with pytest.raises(BadFrame, match="3 of 9 bytes of the frame header"):
        reader.frame(1024)
    with pytest.raises(PeerClosed):
        FrameReader(server, timeout_s=0.2).frame(1024)  # closed between frames: no error


def test_replies_of_any_length_arrive_aligned(pair):
    client, server = pair
    records = C4.new_records(3)
    records["obs"] = np.arange(records["obs"].size, dtype=np.float32).reshape(records["obs"].shape)
    send_frame(server, MsgType.STEP, 4, records)
    msg_type, msg_id, body = recv_reply(client, C4.record_size * 3)
    assert (msg_type, msg_id) == (MsgType.STEP, 4)
    decoded = C4.decode_records(body, 3)
    assert np.frombuffer(body, np.uint8).ctypes.data % BODY_AT == 0  # f32/f64 fields aligned
    np.testing.assert_array_equal(decoded["obs"], records["obs"])
    text = "x" * 1000  # longer than the client expected (an ERROR instead of records)
    send_frame(server, MsgType.ERROR, 5, P.encode_error(ErrorCode.BAD_ACTION, text))
    msg_type, _, body = recv_reply(client, 16)
    assert msg_type == MsgType.ERROR and P.decode_error(body).text == text


def test_a_server_that_stops_answering_is_a_clear_timeout():
    """The client's kernel timeouts (SO_RCVTIMEO): no poll per call, and still no hang."""
    path = socket_path()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)

    def answer_hello_and_spaces_then_nothing() -> None:
        conn, _ = listener.accept()
        reader = FrameReader(conn, timeout_s=5.0)
        for reply in (P.encode_hello_reply("mute"), C4.encode()):
            msg_type, msg_id, _ = reader.frame(1024)
            send_frame(conn, msg_type, msg_id, reply)
        try:
            reader.frame(1024)  # the STEP: never answered
            conn.recv(1)
        finally:
            conn.close()

    server = threading.Thread(target=answer_hello_and_spaces_then_nothing, daemon=True)
    server.start()
    try:
        client = SocketClient(path, timeout_s=0.3)
        assert client.server_name == "mute" and client.spaces == C4
        with pytest.raises(ProtocolError, match=r"did not answer STEP within 0.3 s") as err:
            client.step(np.zeros(3, np.int32))
        assert err.value.code == ErrorCode.INTERNAL
        client.sock.close()
    finally:
        listener.close()
        server.join(timeout=5)
        os.unlink(path)
