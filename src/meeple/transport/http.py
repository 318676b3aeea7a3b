"""JSON over HTTP/1.1 (docs/protocol.md section 5): the easiest transport to serve from
any language, and the slowest. The server binds 127.0.0.1 only; connections are kept alive.
"""

from __future__ import annotations

import http.client
import json
import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING

import numpy as np

from meeple.transport import protocol as P
from meeple.transport.protocol import ErrorCode, MsgType, ProtocolError, Spaces

if TYPE_CHECKING:
    from meeple.transport.server import EnvServer

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
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
    host, _, port = address.rpartition(":")
    if host not in (HOST, "localhost") or not port.isdigit():
        raise ProtocolError(
            ErrorCode.MALFORMED,
            f"HTTP address {address!r}; expected 127.0.0.1:PORT "
            "(servers bind the loopback interface only)",
        )
    return HOST, int(port)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(
            socket.IPPROTO_TCP, socket.TCP_NODELAY, 1
        )  # no 40 ms Nagle stalls
        self.owner = object()  # one driver lease per connection
        self.server.env.clients += 1

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.env.release(self.owner)
            self.server.env.clients -= 1

    def log_message(self, fmt: str, *args: object) -> None:
        log.debug(fmt, *args)

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def _handle(self, method: str) -> None:
        env = self.server.env
        try:
            reply = self._dispatch(env, method)
            self._send(200, reply)
        except ProtocolError as err:
            env.bad_requests += 1
            self._send(
                _STATUS.get(err.code, 400),
                {
                    "error": {
                        "code": int(err.code),
                        "name": getattr(err.code, "name", str(err.code)).lower(),
                        "message": err.text,
                    }
                },
            )

    def _send(self, status: int, obj: dict) -> None:
        body = json.dumps(obj, separators=(",", ":")).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self, env: EnvServer) -> dict:
        n = int(self.headers.get("Content-Length") or 0)
        if n > env.max_body:
            self.close_connection = True
            raise ProtocolError(
                ErrorCode.TOO_LARGE, f"body of {n} bytes exceeds the server maximum {env.max_body}"
            )
        raw = self.rfile.read(n) if n else b"{}"
        try:
            data = json.loads(raw)
        except ValueError as err:
            raise ProtocolError(ErrorCode.MALFORMED, f"request body is not JSON: {err}") from err
        if not isinstance(data, dict):
            raise ProtocolError(ErrorCode.MALFORMED, "request body must be a JSON object")
        return data

    def _dispatch(self, env: EnvServer, method: str) -> dict:
        path = self.path.split("?")[0].rstrip("/")
        route = _ROUTES.get((method, path))
        if route is None:
            routes = ", ".join(f"{m} {p}" for m, p in _ROUTES)
            raise ProtocolError(
                ErrorCode.UNKNOWN_TYPE,
                f"{method} {self.path} is not an endpoint; accepted: {routes}",
            )
        data = self._body(env) if method == "POST" else {}
        if route == MsgType.HELLO:
            return {"version": P.VERSION, "server": env.server_name}
        if route == MsgType.SPACES:
            return env.spaces.to_json()
        if route == MsgType.HEALTH:
            return env.health()
        if route == MsgType.CLOSE:
            env.release(self.owner)
            return {}
        if route == MsgType.RESET:
            seed = data.get("seed")
            if seed is not None and not isinstance(seed, int):
                raise ProtocolError(
                    ErrorCode.MALFORMED, f"seed={seed!r}; expected an integer or null"
                )
            records = env.execute(self.owner, route, seed=seed)
        elif route in (MsgType.STEP, MsgType.STEP_MULTI):
            try:
                actions = np.asarray(data["actions"], dtype=np.int64)
            except (KeyError, TypeError, ValueError) as err:
                raise ProtocolError(
                    ErrorCode.MALFORMED, f"body needs 'actions': a list of integers ({err})"
                ) from err
            if np.any((actions < -(2**31)) | (actions >= 2**31)):
                raise ProtocolError(ErrorCode.BAD_ACTION, "actions must fit in int32")
            records = env.execute(self.owner, route, actions=actions.astype(np.int32).reshape(-1))
        else:
            records = env.execute(self.owner, route)
        return P.records_to_json(env.spaces, records)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, env: EnvServer, port: int) -> None:
        self.env = env
        super().__init__((HOST, port), _Handler)


class HttpFrontend:
    def __init__(self, server: EnvServer, address: str) -> None:
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
        payload = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        headers = {"Content-Type": "application/json"} if payload is not None else {}
        try:
            self.conn.request(method, path, body=payload, headers=headers)
            response = self.conn.getresponse()
            data = json.loads(response.read())
        except TimeoutError as err:
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

    def observe(self) -> np.ndarray:
        return self._records(self.call("GET", "/observe"), self.spaces.num_envs)

    def health(self) -> dict[str, int]:
        return self.call("GET", "/health")

    def close(self) -> None:
        try:
            self.call("POST", "/close", {})
        except ProtocolError:
            pass
        self.conn.close()
