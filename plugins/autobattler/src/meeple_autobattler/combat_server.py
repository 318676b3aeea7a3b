"""The batched combat service: the Node server's fights, run by :func:`combat.simulate` in batches.

    python -m meeple_autobattler.combat_server --address PATH [--device cpu|cuda] [--parent-pid P]
    node dist/server.js --game autobattler --combat batched:PATH ...

A Unix-socket server speaking docs/protocol.md's frames (section 6): a ``FIGHTS`` request (msg_type
10) carries every fight of one env request of one Node worker (``u32 count``, then ``count`` x 32
units x 9 int32 in combat.ts's input layout); the reply carries per fight the winner and the 32
units' final hp (``count`` x 33 int32). ``HELLO`` is answered as by the env servers; anything else
gets an ``ERROR`` frame naming what was wrong (a malformed or oversized frame also closes the
connection). Connections are served by threads; the simulations run one batch at a time (one
device). It prints ``MEEPLE_SERVER_READY {json}`` like the env servers, so
:class:`meeple.transport.launch.ServerProcess` starts it (``command=service_command(...)``).

``--exit-with-clients``: exit once every connection is closed again, after the first one (the
Node server's workers hold theirs for the server's lifetime), so the service ends with the env
server that used it; the auto-battler backend starts it that way.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import socketserver
import struct
import sys
import threading
import time

import numpy as np
import torch

from meeple.transport.protocol import (
    HEADER,
    HEADER_SIZE,
    VERSION,
    ErrorCode,
    MsgType,
    encode_error,
    encode_frame,
    encode_hello_reply,
)
from meeple_autobattler import combat

FIGHTS = 10  # docs/protocol.md section 6
INPUT_INTS = combat.FIGHT_UNITS * combat.UNIT_FIELDS  # 288
RESULT_INTS = 1 + combat.FIGHT_UNITS  # winner, final hp of units 0..31
MAX_BODY = 64 * 1024 * 1024
FRAME_TIMEOUT_S = 5.0
NAME = "meeple-combat"


class Malformed(Exception):
    """A frame that cannot be trusted: answered with ERROR, then the connection is closed."""

    def __init__(self, code: int, text: str) -> None:
        super().__init__(text)
        self.code = code


def run_fights(body: bytes, device: str) -> bytes:
    """A FIGHTS body -> its reply body (``count`` x [winner, hp x 32] int32)."""
    if len(body) < 4:
        raise Malformed(
            ErrorCode.MALFORMED,
            f"FIGHTS body is {len(body)} bytes; expected u32 count, "
            f"then count x {INPUT_INTS} int32",
        )
    (count,) = struct.unpack_from("<I", body)
    if len(body) != 4 + 4 * INPUT_INTS * count:
        raise Malformed(
            ErrorCode.MALFORMED,
            f"FIGHTS body is {len(body)} bytes for count {count}; expected "
            f"{4 + 4 * INPUT_INTS * count} (u32 count + count x 32 units x 9 int32)",
        )
    if count == 0:
        return b""
    flat = np.frombuffer(body, dtype="<i4", offset=4)
    units = torch.from_numpy(flat.reshape(count, combat.FIGHT_UNITS, combat.UNIT_FIELDS).copy())
    out = combat.simulate(units.to(device))
    result = torch.cat([out.winner[:, None], out.hp], dim=1).to("cpu", torch.int32)
    return result.numpy().astype("<i4", copy=False).tobytes()


class _Handler(socketserver.BaseRequestHandler):
    server: _Service

    def handle(self) -> None:
        conn: socket.socket = self.request
        self.server.opened()
        try:
            while True:
                header = self._read(conn, HEADER_SIZE, idle=True)
                if header is None:
                    return
                msg_type, msg_id, body_len = HEADER.unpack(header)
                try:
                    if body_len > MAX_BODY:
                        raise Malformed(
                            ErrorCode.TOO_LARGE,
                            f"body_len {body_len} exceeds the service maximum {MAX_BODY}",
                        )
                    body = self._read(conn, body_len, idle=False)
                    reply = self._dispatch(msg_type, body)
                except Malformed as err:
                    self.server.errors += 1
                    with contextlib.suppress(OSError):
                        error = encode_error(err.code, str(err))
                        conn.sendall(encode_frame(MsgType.ERROR, msg_id, error))
                    return
                conn.sendall(encode_frame(msg_type, msg_id, reply))
        except (OSError, Malformed):
            return
        finally:
            self.server.closed()

    def _read(self, conn: socket.socket, n: int, idle: bool) -> bytes | None:
        """``n`` bytes; None at a clean end between frames. A frame that stalls for the frame
        timeout (counted from its first byte) or ends early is malformed."""
        buf = bytearray()
        conn.settimeout(None if idle else FRAME_TIMEOUT_S)
        while len(buf) < n:
            try:
                chunk = conn.recv(n - len(buf))
            except TimeoutError:
                raise Malformed(
                    ErrorCode.MALFORMED,
                    f"truncated frame: {len(buf)} of {n} bytes after {FRAME_TIMEOUT_S:.0f} s",
                ) from None
            if not chunk:
                if idle and not buf:
                    return None
                raise Malformed(
                    ErrorCode.MALFORMED,
                    f"truncated frame: connection closed after {len(buf)} of {n} bytes",
                )
            buf += chunk
            conn.settimeout(FRAME_TIMEOUT_S)
        return bytes(buf)

    def _dispatch(self, msg_type: int, body: bytes) -> bytes:
        if msg_type == FIGHTS:
            with self.server.lock:  # one device: one batch at a time
                reply = run_fights(body, self.server.device)
            self.server.fights += len(reply) // (4 * RESULT_INTS)
            return reply
        if msg_type == MsgType.HELLO:
            return encode_hello_reply(NAME, VERSION)
        raise Malformed(
            ErrorCode.UNKNOWN_TYPE,
            f"msg_type {msg_type} is not served here; accepted: HELLO(1), FIGHTS({FIGHTS})",
        )


class _Service(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, address: str, device: str, exit_with_clients: bool) -> None:
        self.device = device
        self.lock = threading.Lock()
        self.fights = self.errors = 0
        self.clients = 0
        self.seen_client = False
        self.exit_with_clients = exit_with_clients
        self._count_lock = threading.Lock()
        old = os.umask(0o177)
        try:
            super().__init__(address, _Handler)
        finally:
            os.umask(old)

    def opened(self) -> None:
        with self._count_lock:
            self.clients += 1
            self.seen_client = True

    def closed(self) -> None:
        with self._count_lock:
            self.clients -= 1
            last = self.clients == 0
        if last and self.exit_with_clients:
            threading.Thread(target=self.shutdown, daemon=True).start()


def _remove_stale(path: str) -> None:
    if not os.path.exists(path):
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except OSError:
        os.unlink(path)  # nobody listens: a killed service's leftover
        return
    finally:
        probe.close()
    raise SystemExit(f"meeple-combat: error: a server is already listening on {path}")


def service_command(
    address: str, *, device: str = "cpu", exit_with_clients: bool = False
) -> list[str]:
    """The command line of a service at ``address`` that exits with this process."""
    cmd = [sys.executable, "-m", "meeple_autobattler.combat_server", "--address", address,
           "--device", device, "--parent-pid", str(os.getpid())]
    return cmd + (["--exit-with-clients"] if exit_with_clients else [])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m meeple_autobattler.combat_server", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--address", required=True, help="the Unix socket path to listen on")
    parser.add_argument("--device", default="cpu", help="torch device (cpu, cuda, cuda:1, ...)")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: default)")
    parser.add_argument("--parent-pid", type=int, default=0, help="exit when this process is gone")
    parser.add_argument("--exit-with-clients", action="store_true",
                        help="exit once every connection closed again, after the first one")
    args = parser.parse_args(argv)
    try:
        torch.empty(1, device=args.device)
    except (RuntimeError, AssertionError) as err:
        print(f"meeple-combat: error: --device {args.device}: {err}", file=sys.stderr)
        return 2
    if args.threads:
        torch.set_num_threads(args.threads)
    _remove_stale(args.address)
    service = _Service(args.address, args.device, args.exit_with_clients)

    def stop(*_: object) -> None:
        threading.Thread(target=service.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if args.parent_pid:
        def watch() -> None:
            while os.getppid() == args.parent_pid:
                time.sleep(0.5)
            stop()

        threading.Thread(target=watch, daemon=True).start()
    ready = {"transport": "socket", "address": args.address, "pid": os.getpid(),
             "service": "combat", "device": args.device, "msg_type": FIGHTS}
    print("MEEPLE_SERVER_READY " + json.dumps(ready), flush=True)
    try:
        service.serve_forever(poll_interval=0.2)
    finally:
        service.server_close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(args.address)
    print(f"meeple-combat: served {service.fights} fights, {service.errors} bad frames",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
