"""Binary frames over a Unix stream socket: the server's front end and the client.

The socket file is created 0600. A server thread serves each connection; a malformed frame
gets an ERROR reply and only that connection is closed. The client keeps one request in
flight and every receive has a timeout.

The hot path is one ``send`` and one ``recv`` per frame on each side: a frame usually arrives
whole, so header and body are read together into a buffer, and written with one call. Reading
header and body apart and switching the socket's timeout around them took five system calls
per request on the server and six on the client (Python polls before every call on a socket
with a timeout: +3-4 us per round trip in a bare Python ping-pong on the 2-core VM, whose
whole round trip is 12-18 us on one core). Both sides spin before a blocking ``recv``
(:func:`recv_first`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import struct
import threading
import time

import numpy as np

from meeple.transport import protocol as P
from meeple.transport.protocol import (
    CLOSE,
    ERROR,
    HEADER,
    HEADER_SIZE,
    OBSERVE,
    RESET,
    STEP,
    STEP_MULTI,
    ErrorCode,
    MsgType,
    ProtocolError,
)
from meeple.transport.service import Service
from meeple.transport.waiting import SpinBudget, WaitPolicy, spin_then_block

log = logging.getLogger(__name__)

# A reply's body starts 16-byte aligned in its buffer (records hold f32/f64 fields that numpy
# and torch then read in place); its header sits just before.
BODY_AT = 16
HEAD_AT = BODY_AT - HEADER_SIZE
UNKNOWN_REPLY = 256  # room for a reply whose size the client cannot predict (HELLO, ERROR)
ENV_COMMANDS = frozenset((RESET, STEP, STEP_MULTI, OBSERVE))
# errors that count as HEALTH's bad_requests (busy, env_exception, internal are not the client's)
COUNTED = frozenset(
    (
        ErrorCode.MALFORMED,
        ErrorCode.UNKNOWN_TYPE,
        ErrorCode.VERSION,
        ErrorCode.BAD_ACTION,
        ErrorCode.NOT_READY,
    )
)


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


def send_frame(
    sock: socket.socket, msg_type: int, msg_id: int, body: bytes | memoryview | np.ndarray = b""
) -> None:
    """One system call for header and body (two writes would wake the reader twice)."""
    if isinstance(body, np.ndarray):  # records: one flat copy is cheaper than a cast view
        body = body.tobytes() if body.nbytes < 4096 else memoryview(body).cast("B")
    elif not isinstance(body, bytes):
        body = memoryview(body).cast("B")
    head = HEADER.pack(msg_type, msg_id, len(body))
    if len(body) < 4096:  # copying a small body is cheaper than a scatter list
        sock.sendall(head + body)
    else:
        sent = sock.sendmsg([head, body])
        if sent < HEADER_SIZE + len(body):
            sock.sendall((head + bytes(body))[sent:])


def set_io_timeout(sock: socket.socket, timeout_s: float) -> None:
    """Kernel timeouts (``SO_RCVTIMEO``/``SO_SNDTIMEO``) on a blocking socket: a call that
    runs out raises ``BlockingIOError``. Python's own socket timeout would ``poll`` before
    every ``recv`` and ``send`` (an extra system call each: +3-4 us per round trip here)."""
    seconds = int(min(timeout_s, 2**31 - 1))  # 0 s 0 us would mean no limit: round up
    micros = max(int((min(timeout_s, 2**31 - 1) - seconds) * 1e6), 0 if seconds else 1)
    timeval = struct.pack("ll", seconds, micros)
    sock.settimeout(None)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)


def recv_first(
    sock: socket.socket, view: memoryview, waiting: tuple[WaitPolicy, SpinBudget] | None
) -> int:
    """``sock.recv_into(view)``, after spinning on non-blocking tries (``waiting``: the
    policy of :func:`~meeple.transport.waiting.spin_then_block`). A waiter that spins keeps its
    core busy, so the answer needs no wake-up of an idle core: on the idle 2-core VM a 1-env
    counter round trip with Python at both ends took ~150 us blocking and ~38 us spinning
    (~38 us blocking too, with both processes pinned to one core)."""
    if waiting is None:
        return sock.recv_into(view)

    def attempt() -> int | None:
        try:
            return sock.recv_into(view, 0, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return None

    return spin_then_block(attempt, lambda: sock.recv_into(view), *waiting)


def recv_reply(
    sock: socket.socket, expected: int, waiting: tuple[WaitPolicy, SpinBudget] | None = None
) -> tuple[int, int, memoryview]:
    """One frame ``(msg_type, msg_id, body)``, in one ``recv`` when its body is at most
    ``expected`` bytes. Each reply gets a fresh buffer: its records outlive the next call."""
    buf = bytearray(BODY_AT + expected)
    view = memoryview(buf)
    got = 0
    while got < HEADER_SIZE:
        k = recv_first(sock, view[HEAD_AT + got :], waiting if got == 0 else None)
        if k == 0:
            raise PeerClosed(f"connection closed after {got} of {HEADER_SIZE} header bytes")
        got += k
    msg_type, msg_id, n = HEADER.unpack_from(buf, HEAD_AT)
    end = BODY_AT + n
    if n > expected:  # a longer reply than predicted (an ERROR's text): move to a bigger buffer
        bigger = bytearray(end)
        bigger[: HEAD_AT + got] = view[: HEAD_AT + got]
        view.release()
        buf, view = bigger, memoryview(bigger)
    got += HEAD_AT
    while got < end:
        k = sock.recv_into(view[got:end])
        if k == 0:
            raise PeerClosed(f"connection closed after {got - BODY_AT} of {n} body bytes")
        got += k
    return msg_type, msg_id, view[BODY_AT:end]


class BadFrame(Exception):
    """A frame that cannot be read: answered with ``error``, then the connection is closed."""

    def __init__(self, msg_id: int, error: ProtocolError) -> None:
        super().__init__(error.text)
        self.msg_id, self.error = msg_id, error


class BodyBudget:
    """The bytes of unfinished request bodies over all of a server's connections, capped.

    A body is buffered as it arrives, never as announced (a header may announce 64 MiB and
    then drip); the cap bounds what greedy clients that do send can make the server hold.
    """

    def __init__(self, limit: int) -> None:
        self.limit, self.used = limit, 0
        self._lock = threading.Lock()

    def take(self, n: int) -> bool:
        with self._lock:
            if self.used + n > self.limit:
                return False
            self.used += n
            return True

    def give_back(self, n: int) -> None:
        with self._lock:
            self.used -= n


class FrameReader:
    """The server's reads: frames from a connection through one reusable buffer.

    A frame's first byte may take forever (a learner can take minutes between steps), but
    once it has come the whole frame must follow within ``timeout_s`` (one deadline for the
    frame, not for each read: a client that drips a byte a second is cut all the same). The
    socket is in timeout mode only while a split frame is completed. Bodies come back as
    ``bytes`` (the env may keep its actions); one longer than the buffer grows as it arrives,
    within ``budget`` (shared by the server's connections).
    """

    def __init__(
        self,
        conn: socket.socket,
        timeout_s: float,
        capacity: int = 1 << 16,
        policy: WaitPolicy | None = None,
        budget: BodyBudget | None = None,
    ) -> None:
        """``policy``: spin for the next frame before blocking (:func:`recv_first`)."""
        self.conn, self.timeout_s, self.budget = conn, timeout_s, budget
        self.waiting = None if policy is None else (policy, SpinBudget())
        self.buf = bytearray(capacity)
        self.view = memoryview(self.buf)
        self.start = self.end = 0  # unread bytes: buf[start:end]
        self.deadline: float | None = None  # of a frame that did not come in one recv

    def frame(self, max_body: int) -> tuple[int, int, bytes]:
        """``(msg_type, msg_id, body)``; raises :class:`PeerClosed` when the client closed
        between frames and :class:`BadFrame` for a truncated, stalled or oversized frame."""
        if self.end == self.start:  # idle between frames: no time limit
            self.start = self.end = 0
            self.end = recv_first(self.conn, self.view, self.waiting)
            if not self.end:
                raise PeerClosed("connection closed between frames")
        if self.end - self.start < HEADER_SIZE:  # rare: a header split over segments, or stalled
            self._header_rest()
        msg_type, msg_id, n = HEADER.unpack_from(self.buf, self.start)
        if n > max_body:
            raise BadFrame(
                msg_id,
                ProtocolError(
                    ErrorCode.TOO_LARGE,
                    f"body_len {n} exceeds the server maximum {max_body} (transport.max_body)",
                ),
            )
        self.start += HEADER_SIZE
        if self.end - self.start >= n:  # the common case: the whole frame came in one recv
            body = bytes(self.view[self.start : self.start + n])
            self.start += n
        else:
            body = self._body_rest(msg_id, n)
        if self.deadline is not None:  # the next frame may be far off: block without limit
            self.conn.settimeout(None)
            self.deadline = None
        return msg_type, msg_id, body

    def _header_rest(self) -> None:
        try:
            self._fill(HEADER_SIZE, "frame header")
        except PeerClosed as err:
            error = ProtocolError(ErrorCode.MALFORMED, f"truncated frame: {err}")
            raise BadFrame(0, error) from None
        except TimeoutError:
            got = self.end - self.start
            raise BadFrame(
                0,
                ProtocolError(
                    ErrorCode.MALFORMED,
                    f"truncated frame: {got} of {HEADER_SIZE} header bytes within "
                    f"{self.timeout_s} s (the server's frame timeout, counted from the frame's "
                    "first byte); connection closed",
                ),
            ) from None

    def _body_rest(self, msg_id: int, n: int) -> bytes:
        try:
            if n <= len(self.buf):
                self._fill(n, "frame body")
                body = bytes(self.view[self.start : self.start + n])
                self.start += n
                return body
            return self._long_body(msg_id, n)
        except (PeerClosed, TimeoutError) as err:
            why = err if isinstance(err, PeerClosed) else (
                f"{self.timeout_s} s passed (the server's frame timeout, counted from the "
                "frame's first byte)"
            )  # fmt: skip
            raise BadFrame(
                msg_id,
                ProtocolError(
                    ErrorCode.MALFORMED,
                    f"truncated frame: {why} (header announced {n} body bytes); connection closed",
                ),
            ) from None

    def _long_body(self, msg_id: int, n: int) -> bytes:
        """A body longer than the buffer, read through it and kept as it arrives."""
        body = bytearray(self.view[self.start : self.end])
        self.start = self.end = 0
        held = 0
        try:
            while True:
                if self.budget is not None:
                    if not self.budget.take(len(body) - held):
                        raise BadFrame(msg_id, self._over_budget(n, len(body)))
                    held = len(body)
                if len(body) >= n:
                    return bytes(body)
                k = self._recv_into(self.view[: min(len(self.buf), n - len(body))])
                if k == 0:
                    raise PeerClosed(
                        f"connection closed after {len(body)} of {n} bytes of the frame body"
                    )
                body += self.view[:k]
        finally:
            if self.budget is not None:
                self.budget.give_back(held)

    def _over_budget(self, n: int, got: int) -> ProtocolError:
        limit = self.budget.limit
        return ProtocolError(
            ErrorCode.TOO_LARGE,
            f"a body of {n} bytes refused after {got}: the server holds {self.budget.used} bytes "
            f"of unfinished request bodies over all connections, its limit is {limit} "
            "(4 x transport.max_body); connection closed, retry later",
        )

    def _recv_into(self, view: memoryview) -> int:
        """One ``recv`` within what is left of this frame's deadline."""
        now = time.monotonic()
        if self.deadline is None:  # counted from the first wait: its first bytes just came
            self.deadline = now + self.timeout_s
        left = self.deadline - now
        if left <= 0:
            raise TimeoutError
        self.conn.settimeout(left)
        return self.conn.recv_into(view)

    def _fill(self, n: int, what: str) -> None:
        """Receive until ``n`` unread bytes are buffered (``n`` <= capacity)."""
        if self.start + n > len(self.buf):  # make room at the end: move the unread bytes first
            have = self.end - self.start
            self.buf[:have] = bytes(self.view[self.start : self.end])
            self.start, self.end = 0, have
        while self.end - self.start < n:
            k = self._recv_into(self.view[self.end :])
            if k == 0:
                raise PeerClosed(
                    f"connection closed after {self.end - self.start} of {n} bytes of the {what}"
                )
            self.end += k


# -- server ---------------------------------------------------------------------------------------


class SocketFrontend:
    """Frames over a Unix socket (the shm transport's control plane too): a thread per
    connection, each reading through a :class:`FrameReader`."""

    # connections the kernel queues while the accept thread catches up (capped by
    # net.core.somaxconn); a client that still finds it full retries within its timeout
    backlog = 1024

    def __init__(self, server: Service, path: str) -> None:
        self.server, self.path, self.address = server, path, path
        self.budget = BodyBudget(4 * server.max_body)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # the socket file is born 0600
        try:
            self.listener.bind(path)
        finally:
            os.umask(old)
        self.listener.listen(self.backlog)
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
            threading.Thread(
                target=self.serve, args=(conn,), name="meeple-conn", daemon=True
            ).start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.listener.close()
        for conn in list(self._conns):
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def serve(self, conn: socket.socket) -> None:
        """Answer one connection's frames until it closes (or breaks the framing)."""
        server, counters = self.server, self.server.counters
        conn.settimeout(None)
        self._conns.add(conn)
        owner = object()
        # "hello": HELLO answered; "ready": RESET sent on this connection (the hot path's test)
        state = {"hello": False, "ready": False}
        reader = FrameReader(conn, server.frame_timeout_s, policy=server.policy, budget=self.budget)
        counters.connected()
        try:
            while True:
                try:
                    msg_type, msg_id, body = reader.frame(server.max_body)
                except PeerClosed:
                    return
                except BadFrame as bad:
                    self._reject(conn, bad.msg_id, bad.error)
                    return
                try:
                    reply = self._dispatch(owner, state, msg_type, body)
                except ProtocolError as err:
                    if err.code in COUNTED:
                        counters.bad_request()
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
                if msg_type == CLOSE:
                    return
        except OSError:
            pass  # the client went away mid-reply: drop only this connection
        finally:
            server.release(owner)
            counters.disconnected()
            self._conns.discard(conn)
            with contextlib.suppress(OSError):
                conn.close()

    def _reject(self, conn: socket.socket, msg_id: int, err: ProtocolError) -> None:
        self.server.counters.bad_request()
        log.warning("dropping a connection: %s", err)
        with contextlib.suppress(OSError):
            send_frame(conn, MsgType.ERROR, msg_id, P.encode_error(err.code, err.text))

    def _dispatch(
        self, owner: object, state: dict, msg_type: int, body: bytes
    ) -> bytes | np.ndarray:
        if msg_type in ENV_COMMANDS and state["ready"]:  # the hot path, before the rest
            return self._env_command(owner, msg_type, body)
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
            state["ready"] = False
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
        reply = self._env_command(owner, msg_type, body, ready=False)  # RESET or OBSERVE
        state["ready"] = msg_type == RESET
        return reply

    def _env_command(
        self, owner: object, msg_type: int, body: bytes, ready: bool = True
    ) -> np.ndarray:
        """``ready``: this connection has sent RESET (it may step)."""
        server = self.server
        if msg_type == STEP:
            actions = P.decode_actions(body, server.num_envs, "STEP")
            if not ready:
                raise server.not_ready(owner, msg_type)
            return server.execute(owner, STEP, actions=actions)
        if msg_type == MsgType.RESET:
            return server.execute(owner, msg_type, seed=P.decode_reset(body))
        if msg_type == MsgType.STEP_MULTI:
            n = server.num_envs * server.spaces.num_seats
            actions = P.decode_actions(body, n, "STEP_MULTI")
            if not ready:
                raise server.not_ready(owner, msg_type)
            return server.execute(owner, msg_type, actions=actions)
        if msg_type == MsgType.OBSERVE and body == b"\x01":
            # protocol.md's all_seats addition: array envs observe one seat per env here
            raise ProtocolError(ErrorCode.UNKNOWN_TYPE, P.OBSERVE_ALL_SEATS_UNSERVED)
        if body and not (msg_type == MsgType.OBSERVE and body == b"\x00"):
            raise ProtocolError(
                ErrorCode.MALFORMED, f"{MsgType(msg_type).name} takes an empty body"
            )
        return server.execute(owner, msg_type)


# -- client ---------------------------------------------------------------------------------------


def connect_unix(path: str, timeout_s: float) -> socket.socket:
    """A connected Unix socket. A full listen backlog (``EAGAIN``: a burst of connections
    the server has not accepted yet) is retried until ``timeout_s``; anything else fails
    at once (no server there)."""
    deadline = time.monotonic() + timeout_s
    pause = 0.001
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        try:
            sock.connect(path)
            return sock
        except BlockingIOError:
            sock.close()
            if time.monotonic() + pause > deadline:
                raise ConnectionError(
                    f"the env server at {path} did not accept the connection within "
                    f"{timeout_s} s (transport.timeout_s): its listen backlog stayed full"
                ) from None
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
        except OSError as err:
            sock.close()
            raise ConnectionError(f"cannot connect to the env server at {path}: {err}") from err


class SocketClient:
    """Frames over a Unix socket (also the control plane of the shm transport)."""

    transient = False

    def __init__(
        self, path: str, timeout_s: float = 30.0, policy: WaitPolicy | None = None
    ) -> None:
        """``policy``: spin for replies before blocking (:func:`recv_first`); None blocks at
        once (the shm transport's control plane, a few calls per run)."""
        self.path, self.timeout_s = path, timeout_s
        self._waiting = None if policy is None else (policy, SpinBudget())
        self.sock = connect_unix(path, timeout_s)
        set_io_timeout(self.sock, timeout_s)
        self._msg_id = 0
        self._broken: str | None = None  # why this client's connection cannot be trusted
        version, self.server_name = P.decode_hello_reply(
            self.call(MsgType.HELLO, P.encode_hello_request())
        )
        self.spaces = P.Spaces.decode(self.call(MsgType.SPACES))
        n, seats, size = self.spaces.num_envs, self.spaces.num_seats, self.spaces.record_size
        self._single_bytes, self._multi_bytes = n * size, n * seats * size

    def call(self, msg_type: int, body: bytes = b"", expected: int = UNKNOWN_REPLY) -> memoryview:
        """Send one request and return its reply's body (``expected``: its likely size)."""
        if self._broken is not None:
            raise ProtocolError(
                ErrorCode.INTERNAL,
                f"this client timed out earlier ({self._broken}) and closed its connection "
                "(a late reply would answer the wrong request): connect again",
            )
        self._msg_id = (self._msg_id + 1) & 0xFFFFFFFF
        try:
            send_frame(self.sock, msg_type, self._msg_id, body)
            reply_type, reply_id, reply = recv_reply(self.sock, expected, self._waiting)
        except (TimeoutError, BlockingIOError) as err:  # BlockingIOError: SO_RCVTIMEO ran out
            self._broken = f"{MsgType(msg_type).name} after {self.timeout_s} s"
            self.sock.close()
            raise ProtocolError(
                ErrorCode.INTERNAL,
                f"env server at {self.path} did not answer "
                f"{MsgType(msg_type).name} within {self.timeout_s} s (transport.timeout_s)",
            ) from err
        except OSError as err:
            raise ProtocolError(
                ErrorCode.INTERNAL, f"env server at {self.path} is gone: {err}"
            ) from err
        if reply_type == ERROR:
            raise P.decode_error(reply)
        if reply_id != self._msg_id or reply_type != msg_type:
            raise ProtocolError(
                ErrorCode.MALFORMED,
                f"reply {reply_type}/{reply_id} does not answer {msg_type}/{self._msg_id}",
            )
        return reply

    def _records(self, reply: memoryview, count: int) -> np.ndarray:
        return self.spaces.decode_records(reply, count)

    def reset(self, seed: int | None) -> np.ndarray:
        reply = self.call(MsgType.RESET, P.encode_reset(seed), self._single_bytes)
        return self._records(reply, self.spaces.num_envs)

    def step(self, actions: np.ndarray) -> np.ndarray:
        reply = self.call(STEP, P.encode_actions(actions), self._single_bytes)
        return self._records(reply, self.spaces.num_envs)

    def step_multi(self, actions: np.ndarray) -> np.ndarray:
        n, seats = self.spaces.num_envs, self.spaces.num_seats
        reply = self.call(MsgType.STEP_MULTI, P.encode_actions(actions), self._multi_bytes)
        return self._records(reply, n * seats).reshape(n, seats)

    def observe(self, all_seats: bool = False) -> np.ndarray:
        """Current records; ``all_seats``: one per env and seat (``[n, seats]``, as STEP_MULTI)."""
        if all_seats:
            n, seats = self.spaces.num_envs, self.spaces.num_seats
            reply = self.call(MsgType.OBSERVE, b"\x01", self._multi_bytes)
            return self._records(reply, n * seats).reshape(n, seats)
        reply = self.call(MsgType.OBSERVE, b"", self._single_bytes)
        return self._records(reply, self.spaces.num_envs)

    def health(self) -> dict[str, int]:
        return P.decode_health(self.call(MsgType.HEALTH))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.call(MsgType.CLOSE)
        self.sock.close()
