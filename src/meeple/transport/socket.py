"""Binary frames over a Unix stream socket: the server's front end and the client.

The socket file is created 0600. A server thread serves each connection; a malformed frame
gets an ERROR reply and only that connection is closed. The client keeps one request in
flight and every receive has a timeout.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from typing import TYPE_CHECKING

import numpy as np

from meeple.transport import protocol as P
from meeple.transport.protocol import HEADER, HEADER_SIZE, ErrorCode, MsgType, ProtocolError

if TYPE_CHECKING:
    from meeple.transport.server import EnvServer

log = logging.getLogger(__name__)


class PeerClosed(ConnectionError):
    pass


def recv_exact(sock: socket.socket, n: int, what: str) -> bytearray:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            raise PeerClosed(f"connection closed after {got} of {n} bytes of the {what}")
        got += k
    return buf


def recv_header(conn: socket.socket, timeout_s: float) -> bytearray:
    """A frame header from a blocking socket: idle clients may wait forever before its first
    byte (a learner can take minutes between steps), but once it starts the rest must come
    within ``timeout_s`` (the socket is then left in timeout mode)."""
    buf = bytearray(HEADER_SIZE)
    view = memoryview(buf)
    got = conn.recv_into(view)
    if got == 0:
        raise PeerClosed(f"connection closed after 0 of {HEADER_SIZE} bytes of the frame header")
    if got < HEADER_SIZE:  # rare: a header split over two segments, or a stalled client
        conn.settimeout(timeout_s)
        try:
            view[got:] = recv_exact(conn, HEADER_SIZE - got, "frame header")
        except PeerClosed as err:
            raise PeerClosed(
                f"connection closed after {got} of {HEADER_SIZE} bytes of the frame header"
            ) from err
        except TimeoutError as err:
            raise TimeoutError(
                f"truncated frame: {got} of {HEADER_SIZE} header bytes, then nothing for "
                f"{timeout_s} s (the server's frame timeout); connection closed"
            ) from err
    return buf


def send_frame(
    sock: socket.socket, msg_type: int, msg_id: int, body: bytes | memoryview | np.ndarray = b""
) -> None:
    if isinstance(body, np.ndarray):
        body = body.view(np.uint8).reshape(-1)
    data = memoryview(body).cast("B") if not isinstance(body, bytes) else body
    head = HEADER.pack(msg_type, msg_id, len(data))
    if len(data) < 4096:
        sock.sendall(head + bytes(data))
    else:
        sent = sock.sendmsg([head, data])
        if sent < HEADER_SIZE + len(data):
            sock.sendall((head + bytes(data))[sent:])


# -- server ---------------------------------------------------------------------------------------


class SocketFrontend:
    def __init__(self, server: EnvServer, path: str) -> None:
        self.server, self.path = server, path
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # the socket file is born 0600
        try:
            self.listener.bind(path)
        finally:
            os.umask(old)
        self.listener.listen(64)
        self.listener.settimeout(0.2)
        self._stop = threading.Event()
        self._conns: set[socket.socket] = set()
        self._thread = threading.Thread(target=self._accept_loop, name="meeple-accept", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                break
            conn.settimeout(None)
            self._conns.add(conn)
            threading.Thread(
                target=self._serve, args=(conn,), name="meeple-conn", daemon=True
            ).start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.listener.close()
        for conn in list(self._conns):
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def _serve(self, conn: socket.socket) -> None:
        server = self.server
        owner = object()
        state = {"hello": False}
        server.clients += 1
        try:
            while True:
                try:
                    head = recv_header(conn, server.frame_timeout_s)
                except PeerClosed as err:
                    if "after 0 of" not in str(err):
                        self._reject(
                            conn, 0, ProtocolError(ErrorCode.MALFORMED, f"truncated frame: {err}")
                        )
                    return
                except TimeoutError as err:
                    self._reject(conn, 0, ProtocolError(ErrorCode.MALFORMED, str(err)))
                    return
                msg_type, msg_id, body_len = HEADER.unpack(head)
                if body_len > server.max_body:
                    self._reject(
                        conn,
                        msg_id,
                        ProtocolError(
                            ErrorCode.TOO_LARGE,
                            f"body_len {body_len} exceeds the server maximum {server.max_body} "
                            "(transport.max_body)",
                        ),
                    )
                    return
                if body_len:
                    conn.settimeout(server.frame_timeout_s)
                try:
                    body = recv_exact(conn, body_len, "frame body") if body_len else bytearray()
                except (PeerClosed, TimeoutError) as err:
                    self._reject(
                        conn,
                        msg_id,
                        ProtocolError(
                            ErrorCode.MALFORMED,
                            f"truncated frame: {err} (header announced {body_len} body bytes)",
                        ),
                    )
                    return
                if conn.gettimeout() is not None:  # blocking again: the next frame may be far off
                    conn.settimeout(None)
                try:
                    reply = self._dispatch(owner, state, msg_type, bytes(body))
                except ProtocolError as err:
                    server.bad_requests += err.code in (
                        ErrorCode.MALFORMED,
                        ErrorCode.UNKNOWN_TYPE,
                        ErrorCode.VERSION,
                        ErrorCode.BAD_ACTION,
                        ErrorCode.NOT_READY,
                    )
                    send_frame(conn, MsgType.ERROR, msg_id, P.encode_error(err.code, err.text))
                    if err.code == ErrorCode.MALFORMED:
                        return
                    continue
                except Exception as err:  # noqa: BLE001 - a server bug must not kill other connections
                    log.exception("request %d failed", msg_type)
                    send_frame(
                        conn, MsgType.ERROR, msg_id, P.encode_error(ErrorCode.INTERNAL, repr(err))
                    )
                    continue
                send_frame(conn, msg_type, msg_id, reply)
                if msg_type == MsgType.CLOSE:
                    return
        except OSError:
            pass  # the client went away mid-reply: drop only this connection
        finally:
            server.release(owner)
            server.clients -= 1
            self._conns.discard(conn)
            with contextlib.suppress(OSError):
                conn.close()

    def _reject(self, conn: socket.socket, msg_id: int, err: ProtocolError) -> None:
        self.server.bad_requests += 1
        log.warning("dropping a connection: %s", err)
        with contextlib.suppress(OSError):
            send_frame(conn, MsgType.ERROR, msg_id, P.encode_error(err.code, err.text))

    def _dispatch(
        self, owner: object, state: dict, msg_type: int, body: bytes
    ) -> bytes | np.ndarray:
        server = self.server
        if msg_type == MsgType.HELLO:
            version = P.decode_hello_request(body)
            if version != P.VERSION:
                raise ProtocolError(
                    ErrorCode.VERSION,
                    f"client speaks protocol version {version}; this server speaks {P.VERSION}",
                )
            state["hello"] = True
            return P.encode_hello_reply(server.server_name)
        if msg_type not in MsgType._value2member_map_ or msg_type == MsgType.ERROR:
            names = ", ".join(f"{m.name}({m.value})" for m in MsgType if m != MsgType.ERROR)
            raise ProtocolError(
                ErrorCode.UNKNOWN_TYPE, f"msg_type {msg_type} is unknown; accepted: {names}"
            )
        if not state["hello"]:
            raise ProtocolError(
                ErrorCode.NOT_READY, f"{MsgType(msg_type).name} before HELLO; send HELLO first"
            )
        if msg_type == MsgType.SPACES:
            return server.spaces.encode()
        if msg_type == MsgType.HEALTH:
            return P.encode_health(**server.health())
        if msg_type == MsgType.CLOSE:
            server.release(owner)
            return b""
        if msg_type == MsgType.SHM_ATTACH:
            if server.transport != "shm":
                raise ProtocolError(
                    ErrorCode.NOT_READY,
                    f"this server runs transport={server.transport}; "
                    "SHM_ATTACH needs a transport=shm server",
                )
            server.acquire(owner)
            return P.encode_name(server.segment_name)
        n, seats = server.num_envs, server.spaces.num_seats
        if msg_type == MsgType.RESET:
            return server.execute(owner, msg_type, seed=P.decode_reset(body))
        if msg_type == MsgType.STEP:
            return server.execute(owner, msg_type, actions=P.decode_actions(body, n, "STEP"))
        if msg_type == MsgType.STEP_MULTI:
            return server.execute(
                owner, msg_type, actions=P.decode_actions(body, n * seats, "STEP_MULTI")
            )
        if body:
            raise ProtocolError(
                ErrorCode.MALFORMED, f"{MsgType(msg_type).name} takes an empty body"
            )
        return server.execute(owner, msg_type)


# -- client ---------------------------------------------------------------------------------------


class SocketClient:
    """Frames over a Unix socket (also the control plane of the shm transport)."""

    transient = False

    def __init__(self, path: str, timeout_s: float = 30.0) -> None:
        self.path, self.timeout_s = path, timeout_s
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout_s)
        try:
            self.sock.connect(path)
        except OSError as err:
            self.sock.close()
            raise ConnectionError(f"cannot connect to the env server at {path}: {err}") from err
        self._msg_id = 0
        version, self.server_name = P.decode_hello_reply(
            self.call(MsgType.HELLO, P.encode_hello_request())
        )
        self.spaces = P.Spaces.decode(self.call(MsgType.SPACES))

    def call(self, msg_type: int, body: bytes = b"") -> bytearray:
        self._msg_id = (self._msg_id + 1) & 0xFFFFFFFF
        try:
            send_frame(self.sock, msg_type, self._msg_id, body)
            head = recv_exact(self.sock, HEADER_SIZE, "reply header")
            reply_type, reply_id, body_len = HEADER.unpack(head)
            reply = recv_exact(self.sock, body_len, "reply body") if body_len else bytearray()
        except TimeoutError as err:
            raise ProtocolError(
                ErrorCode.INTERNAL,
                f"env server at {self.path} did not answer "
                f"{MsgType(msg_type).name} within {self.timeout_s} s (transport.timeout_s)",
            ) from err
        except OSError as err:
            raise ProtocolError(
                ErrorCode.INTERNAL, f"env server at {self.path} is gone: {err}"
            ) from err
        if reply_type == MsgType.ERROR:
            raise P.decode_error(reply)
        if reply_id != self._msg_id or reply_type != msg_type:
            raise ProtocolError(
                ErrorCode.MALFORMED,
                f"reply {reply_type}/{reply_id} does not answer {msg_type}/{self._msg_id}",
            )
        return reply

    def _records(self, reply: bytearray, count: int) -> np.ndarray:
        return self.spaces.decode_records(reply, count)

    def reset(self, seed: int | None) -> np.ndarray:
        return self._records(self.call(MsgType.RESET, P.encode_reset(seed)), self.spaces.num_envs)

    def step(self, actions: np.ndarray) -> np.ndarray:
        return self._records(
            self.call(MsgType.STEP, P.encode_actions(actions)), self.spaces.num_envs
        )

    def step_multi(self, actions: np.ndarray) -> np.ndarray:
        n, seats = self.spaces.num_envs, self.spaces.num_seats
        return self._records(
            self.call(MsgType.STEP_MULTI, P.encode_actions(actions)), n * seats
        ).reshape(n, seats)

    def observe(self) -> np.ndarray:
        return self._records(self.call(MsgType.OBSERVE), self.spaces.num_envs)

    def health(self) -> dict[str, int]:
        return P.decode_health(self.call(MsgType.HEALTH))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.call(MsgType.CLOSE)
        self.sock.close()
