"""JSON over HTTP/1.1 (docs/protocol.md section 5): the easiest transport to serve from
any language, and the slowest. The server binds 127.0.0.1 only; connections are kept alive.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import logging
import reprlib
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

from meeple.transport import protocol as P
from meeple.transport.address import HOST, is_loopback_address
from meeple.transport.protocol import ErrorCode, MsgType, ProtocolError, Spaces
from meeple.transport.service import Service

log = logging.getLogger(__name__)

_STATUS = {
    ErrorCode.BUSY: 409,
    ErrorCode.ENV_EXCEPTION: 500,
    ErrorCode.INTERNAL: 500,
    ErrorCode.TOO_LARGE: 413,
}
_ROUTES = {
    ("GET", "/hello"): MsgType.HELLO,
    ("GET", "/spaces"): MsgType.SPACES,
    ("POST", "/reset"): MsgType.RESET,
    ("POST", "/step"): MsgType.STEP,
    ("POST", "/step_multi"): MsgType.STEP_MULTI,
    ("GET", "/observe"): MsgType.OBSERVE,
    ("GET", "/health"): MsgType.HEALTH,
    ("POST", "/close"): MsgType.CLOSE,
}


def _split(address: str) -> tuple[str, int]:
    if not is_loopback_address(address):
        raise ProtocolError(
            ErrorCode.MALFORMED,
            f"HTTP address {address!r}; expected 127.0.0.1:PORT "
            "(servers bind the loopback interface only)",
        )
    return HOST, int(address.rpartition(":")[2])


def parse_json_object(raw: bytes) -> dict:
    try:
        data = json.loads(raw)
    except RecursionError as err:
        raise ProtocolError(
            ErrorCode.MALFORMED,
            "request body nests too deep; accepted: a JSON object whose arrays nest at most "
            "a few levels (actions: [[int x num_seats] x num_envs])",
        ) from err
    except ValueError as err:
        raise ProtocolError(ErrorCode.MALFORMED, f"request body is not JSON: {err}") from err
    if not isinstance(data, dict):
        raise ProtocolError(ErrorCode.MALFORMED, "request body must be a JSON object")
    return data


def int32_actions(value: object, route: MsgType) -> np.ndarray:
    """``actions`` of a STEP / STEP_MULTI body as flat int32; anything else is refused."""
    shape = "[int x num_envs]" if route == MsgType.STEP else "[[int x num_seats] x num_envs]"
    accepted = f"accepted: 'actions': {shape}, integers in int32 range"
    try:
        actions = np.asarray(value)
    except (ValueError, OverflowError, RecursionError) as err:  # ragged or too deep lists
        raise ProtocolError(
            ErrorCode.MALFORMED, f"'actions' is not {shape} ({err}); {accepted}"
        ) from err
    if actions.ndim and not actions.size:
        return np.zeros(0, np.int32)  # execute() names the count it expects
    if actions.ndim == 0 or actions.dtype.kind not in "iu":
        # floats (1.5), bools, strings, null, integers beyond int64 (object arrays)
        found = "missing" if value is None else f"{reprlib.repr(value)} (dtype {actions.dtype})"
        raise ProtocolError(ErrorCode.MALFORMED, f"'actions' {found}; {accepted}")
    if actions.size and (actions.min() < -(2**31) or actions.max() >= 2**31):
        raise ProtocolError(ErrorCode.BAD_ACTION, f"actions must fit in int32; {accepted}")
    return actions.astype(np.int32).reshape(-1)


class _DeadlineReader(io.RawIOBase):
    """A connection's reads, each given only what is left of the request's ``deadline``
    (None: no limit, between requests). A per-read timeout would let a client that drips a
    byte a second hold a request open for ever."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.deadline: float | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self.deadline is None:
            self.sock.settimeout(None)
        else:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the request's deadline passed")
            self.sock.settimeout(left)
        return self.sock.recv_into(buffer)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(
            socket.IPPROTO_TCP, socket.TCP_NODELAY, 1
        )  # no 40 ms Nagle stalls
        self.reader = _DeadlineReader(self.connection)
        self.rfile = io.BufferedReader(self.reader)
        self.owner = object()  # one driver lease per connection
        self.ready = False  # this connection sent POST /reset (it may step)
        self.server.env.counters.connected()

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass  # the client hung up before its reply was flushed
        finally:
            self.server.env.release(self.owner)
            self.server.env.counters.disconnected()

    def log_message(self, fmt: str, *args: object) -> None:
        log.debug(fmt, *args)

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def handle_one_request(self) -> None:
        # An idle keep-alive connection may wait forever between requests (the learner can
        # take minutes between steps); once a request's first byte arrives, its request line,
        # headers and body must follow within the frame timeout, or the connection is closed.
        self.reader.deadline = None
        try:
            if not self.rfile.peek(1):
                self.close_connection = True
                return
        except OSError:
            self.close_connection = True
            return
        timeout_s = self.server.env.frame_timeout_s
        self.reader.deadline = time.monotonic() + timeout_s  # the whole request, not each read
        try:
            super().handle_one_request()  # a TimeoutError there closes the connection
        except OSError as err:  # the client hung up mid-request: only this connection ends
            log.debug("HTTP connection ended mid-request: %s", err)
            self.close_connection = True

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own refusals (a request line or headers it cannot parse): JSON, as
        every reply of the protocol, not an HTML page."""
        self.close_connection = True
        self.request_version = self.protocol_version  # an unparsed line reads as HTTP/0.9: no headers
        self._send_error(
            ProtocolError(
                ErrorCode.MALFORMED,
                f"{message or 'bad request'} (HTTP {code}); accepted: "
                + ", ".join(f"{m} {p}" for m, p in _ROUTES)
                + " over HTTP/1.1",
            ),
            status=code,
        )

    def _handle(self, method: str) -> None:
        env = self.server.env
        try:
            reply = self._dispatch(env, method)
        except ProtocolError as err:
            env.counters.bad_request()
            self._send_error(err)
        except TimeoutError:
            env.counters.bad_request()
            self.close_connection = True
            log.warning(
                "dropping an HTTP connection: %s %s body did not arrive within %s s",
                method,
                self.path,
                env.frame_timeout_s,
            )
            self._send_error(
                ProtocolError(
                    ErrorCode.MALFORMED,
                    f"the body announced by Content-Length did not arrive within "
                    f"{env.frame_timeout_s} s (the server's frame timeout); connection closed",
                ),
                status=408,
            )
        except OSError as err:  # the client hung up while its body was read
            log.debug("HTTP connection ended mid-request: %s", err)
            self.close_connection = True
        except Exception as err:  # noqa: BLE001 - a server bug must not kill other connections
            log.exception("%s %s failed", method, self.path)
            self._send_error(ProtocolError(ErrorCode.INTERNAL, repr(err)))
        else:
            try:
                self._send(200, reply)
            except OSError as err:  # the client hung up before its reply
                log.debug("HTTP client gone before its reply: %s", err)
                self.close_connection = True

    def _send_error(self, err: ProtocolError, status: int | None = None) -> None:
        with contextlib.suppress(OSError):
            self._send(
                status or _STATUS.get(err.code, 400),
                {
                    "error": {
                        "code": int(err.code),
                        "name": getattr(err.code, "name", str(err.code)).lower(),
                        "message": err.text,
                    }
                },
            )

    def _send(self, status: int, obj: dict) -> None:
        self.reader.deadline = None
        self.connection.settimeout(self.server.env.frame_timeout_s)  # a reader that never reads
        body = json.dumps(obj, separators=(",", ":")).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def _body(self, env: Service) -> dict:
        n = self._content_length(env)
        raw = self.rfile.read(n) if n else b"{}"
        if len(raw) < n:  # the client closed its side early
            self.close_connection = True
            raise ProtocolError(
                ErrorCode.MALFORMED,
                f"body ended after {len(raw)} of the {n} bytes announced by Content-Length",
            )
        return parse_json_object(raw)

    def _content_length(self, env: Service) -> int:
        """Content-Length as announced; a value that cannot frame the body closes the connection."""
        text = self.headers.get("Content-Length")
        if text is None:
            return 0
        accepted = f"accepted: a decimal integer 0..{env.max_body} (transport.max_body)"
        text = text.strip()
        if not (text.isascii() and text.isdigit()):
            self.close_connection = True
            raise ProtocolError(ErrorCode.MALFORMED, f"Content-Length {text[:40]!r}; {accepted}")
        n = int(text)
        if n > env.max_body:
            self.close_connection = True
            raise ProtocolError(
                ErrorCode.TOO_LARGE, f"body of {n} bytes exceeds the server maximum {env.max_body}"
            )
        return n

    def _dispatch(self, env: Service, method: str) -> dict:
        path = self.path.split("?")[0].rstrip("/")
        route = _ROUTES.get((method, path))
        if route is None:
            routes = ", ".join(f"{m} {p}" for m, p in _ROUTES)
            raise ProtocolError(
                ErrorCode.UNKNOWN_TYPE,
                f"{method} {self.path} is not an endpoint; accepted: {routes}",
            )
        if route == MsgType.OBSERVE and "all_seats=1" in self.path.partition("?")[2].split("&"):
            raise ProtocolError(ErrorCode.UNKNOWN_TYPE, P.OBSERVE_ALL_SEATS_UNSERVED)
        data = self._body(env) if method == "POST" else {}
        if route == MsgType.HELLO:
            return {"version": P.VERSION, "server": env.server_name}
        if route == MsgType.SPACES:
            return env.spaces.to_json()
        if route == MsgType.HEALTH:
            return env.health()
        if route == MsgType.CLOSE:
            env.release(self.owner)
            self.ready = False
            return {}
        if route == MsgType.RESET:
            seed = data.get("seed")
            if seed is not None and (type(seed) is not int or not -(2**63) <= seed < 2**64):
                raise ProtocolError(
                    ErrorCode.MALFORMED,
                    f"seed={seed!r:.40}; expected an integer in -2**63..2**64-1 or null",
                )
            records = env.execute(self.owner, route, seed=seed)
            self.ready = True
        elif route in (MsgType.STEP, MsgType.STEP_MULTI):
            actions = int32_actions(data.get("actions"), route)
            if not self.ready:
                raise env.not_ready(self.owner, route)
            records = env.execute(self.owner, route, actions=actions)
        else:
            records = env.execute(self.owner, route)
        return P.records_to_json(env.spaces, records)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # the listen backlog: a burst of connections waits in the kernel, not in SYN retries
    request_queue_size = 1024

    def __init__(self, env: Service, port: int) -> None:
        self.env = env
        super().__init__((HOST, port), _Handler)

    def handle_error(self, request: object, client_address: tuple) -> None:
        """One line for a client that went away; a traceback only for a server bug."""
        err = sys.exc_info()[1]
        if isinstance(err, OSError):
            log.debug("HTTP connection from %s ended: %s", client_address, err)
        else:
            log.exception("HTTP connection from %s failed", client_address)


class HttpFrontend:
    backlog = _Server.request_queue_size

    def __init__(self, server: Service, address: str) -> None:
        _, port = _split(address)
        self.httpd = _Server(server, port)
        self.address = f"{HOST}:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(
            target=self.httpd.serve_forever,
            kwargs={"poll_interval": 0.2},
            name="meeple-http",
            daemon=True,
        )

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class HttpClient:
    """One keep-alive HTTP connection to a server."""

    transient = False

    def __init__(self, address: str, timeout_s: float = 30.0) -> None:
        self.address, self.timeout_s = address, timeout_s
        self._broken: str | None = None  # why this client's connection cannot be trusted
        self.conn = http.client.HTTPConnection(*_split(address), timeout=timeout_s)
        try:
            self.conn.connect()
        except OSError as err:
            raise ConnectionError(f"cannot connect to the env server at {address}: {err}") from err
        self.conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        hello = self.call("GET", "/hello")
        if hello["version"] != P.VERSION:
            raise ProtocolError(
                ErrorCode.VERSION,
                f"server at {address} speaks protocol version {hello['version']}; "
                f"this client speaks {P.VERSION}",
            )
        self.server_name = hello["server"]
        self.spaces = Spaces.from_json(self.call("GET", "/spaces"))

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        if self._broken is not None:
            raise ProtocolError(
                ErrorCode.INTERNAL,
                f"this client timed out earlier ({self._broken}) and closed its connection "
                "(a late reply would answer the wrong request): connect again",
            )
        payload = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        headers = {"Content-Type": "application/json"} if payload is not None else {}
        try:
            self.conn.request(method, path, body=payload, headers=headers)
            response = self.conn.getresponse()
            data = json.loads(response.read())
        except TimeoutError as err:
            self._broken = f"{method} {path} after {self.timeout_s} s"
            self.conn.close()
            raise ProtocolError(
                ErrorCode.INTERNAL,
                f"env server at {self.address} did not answer {method} {path} "
                f"within {self.timeout_s} s (transport.timeout_s)",
            ) from err
        except (OSError, http.client.HTTPException) as err:
            self.conn.close()
            raise ProtocolError(
                ErrorCode.INTERNAL, f"env server at {self.address} is gone: {err!r}"
            ) from err
        if response.status != 200:
            error = data.get("error", {})
            raise ProtocolError(
                error.get("code", ErrorCode.INTERNAL), error.get("message", str(data))
            )
        return data

    def _records(self, data: dict, count: int) -> np.ndarray:
        return P.records_from_json(self.spaces, data, count)

    def reset(self, seed: int | None) -> np.ndarray:
        return self._records(self.call("POST", "/reset", {"seed": seed}), self.spaces.num_envs)

    def step(self, actions: np.ndarray) -> np.ndarray:
        return self._records(
            self.call("POST", "/step", {"actions": np.asarray(actions).tolist()}),
            self.spaces.num_envs,
        )

    def step_multi(self, actions: np.ndarray) -> np.ndarray:
        n, seats = self.spaces.num_envs, self.spaces.num_seats
        data = self.call(
            "POST", "/step_multi", {"actions": np.asarray(actions).reshape(n, seats).tolist()}
        )
        return self._records(data, n * seats).reshape(n, seats)

    def observe(self, all_seats: bool = False) -> np.ndarray:
        if all_seats:
            n, seats = self.spaces.num_envs, self.spaces.num_seats
            return self._records(self.call("GET", "/observe?all_seats=1"), n * seats).reshape(n, seats)
        return self._records(self.call("GET", "/observe"), self.spaces.num_envs)

    def health(self) -> dict[str, int]:
        return self.call("GET", "/health")

    def close(self) -> None:
        try:
            self.call("POST", "/close", {})
        except ProtocolError:
            pass
        self.conn.close()
