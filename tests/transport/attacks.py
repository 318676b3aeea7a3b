"""Hostile clients for tests and for the numbers in docs/transport.md ("Hostile clients")."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import threading
import time
from collections.abc import Iterator

from meeple.transport import protocol as P
from meeple.transport.protocol import MsgType


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def read_frame(s: socket.socket) -> tuple[int, int, bytes]:
    """One whole frame from ``s``: (message type, message id, body)."""

    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = s.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    msg_type, msg_id, n = P.HEADER.unpack(exactly(P.HEADER_SIZE))
    return msg_type, msg_id, exactly(n)


def hello(s: socket.socket) -> None:
    s.sendall(P.encode_frame(MsgType.HELLO, 1, P.encode_hello_request()))
    assert read_frame(s)[0] == MsgType.HELLO


@contextlib.contextmanager
def drip_connections(
    address: str, count: int, announced: int, sent: int, batch: int = 20
) -> Iterator[Iterator[int]]:
    """``count`` connections to a socket/shm server, each HELLO, then a STEP header announcing
    ``announced`` body bytes and ``sent`` of them. Yields an iterator that opens them ``batch``
    at a time and gives the number opened so far; all are closed on exit."""
    socks: list[socket.socket] = []

    def opened() -> Iterator[int]:
        while len(socks) < count:
            for _ in range(min(batch, count - len(socks))):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.settimeout(10)
                s.connect(address)
                socks.append(s)
                hello(s)
                s.sendall(P.HEADER.pack(MsgType.STEP, 2, announced) + b"\0" * sent)
            yield len(socks)

    try:
        yield opened()
    finally:
        for s in socks:
            s.close()


# -- the numbers of docs/transport.md ("Hostile clients"): python -m tests.transport.attacks ------


def _serve(transport: str, workers: int) -> tuple[subprocess.Popen, str]:
    import json
    import sys

    from meeple.transport.launch import READY
    from tests.transport.conftest import COUNTER, socket_path

    address = "127.0.0.1:0" if transport == "http" else socket_path()
    cmd = [sys.executable, "-m", "meeple.serve", "--env-json", json.dumps(COUNTER)]
    cmd += [f"transport={transport}", f"transport.address={address}", "num_envs=4"]
    cmd += [f"transport.num_workers={workers}"] if workers else []
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.startswith(READY), line + proc.stderr.read()
    return proc, json.loads(line[len(READY) :])["address"]


class _Driver(threading.Thread):
    """The real client, stepping as fast as it can while an attack runs."""

    def __init__(self, transport: str, address: str) -> None:
        super().__init__(daemon=True)
        from meeple.transport.client import connect

        self.client = connect(transport, address, timeout_s=30)
        self.stop, self.trips, self.worst, self.error = threading.Event(), 0, 0.0, None

    def run(self) -> None:
        import numpy as np

        try:
            r = self.client.reset(0)
            while not self.stop.is_set():
                start = time.perf_counter()
                r = self.client.step(np.where(r["mask"][:, 1] == 1, 1, 2).astype(np.int32))
                self.worst = max(self.worst, time.perf_counter() - start)
                self.trips += 1
        except Exception as err:  # noqa: BLE001 - reported
            self.error = f"{type(err).__name__}: {err}"

    def finish(self) -> str:
        self.stop.set()
        self.join(30)
        self.client.close()
        return self.error or f"{self.trips} round trips, worst {self.worst * 1e3:.0f} ms"


def _drip(transport: str, address: str, count: int, seconds: float) -> int:
    """``count`` connections announce a 64 MiB body (an HTTP Content-Length of 64 MiB) and drip
    a byte every 0.5 s; returns how many the server had cut when ``seconds`` ran out."""
    socks = []
    for _ in range(count):
        if transport == "http":
            host, port = address.rsplit(":", 1)
            s = socket.create_connection((host, int(port)), timeout=10)
            s.sendall(b"POST /step HTTP/1.1\r\nContent-Length: 67108864\r\n\r\n[")
        else:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(10)
            s.connect(address)
            hello(s)
            s.sendall(P.HEADER.pack(MsgType.STEP, 2, 64 << 20) + b"\0" * 1024)
        socks.append(s)
    end, cut = time.monotonic() + seconds, set()
    while time.monotonic() < end:
        for i, s in enumerate(socks):
            if i not in cut:
                try:
                    s.send(b"\0")
                except OSError:
                    cut.add(i)
        time.sleep(0.5)
    for s in socks:
        s.close()
    return len(cut)


def _burst(transport: str, address: str, count: int) -> tuple[float, str]:
    """``count`` connections opened at once and held; the real client connects meanwhile."""
    from meeple.transport.client import connect

    socks, opened = [], threading.Event()

    def open_all() -> None:
        for _ in range(count):
            try:
                if transport == "http":
                    host, port = address.rsplit(":", 1)
                    s = socket.socket()
                    s.setblocking(False)
                    s.connect_ex((host, int(port)))
                else:
                    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    s.setblocking(False)
                    s.connect(address)
                socks.append(s)
            except OSError:
                pass
            if len(socks) == count // 4:
                opened.set()
        opened.set()

    thread = threading.Thread(target=open_all, daemon=True)
    thread.start()
    opened.wait(10)
    start = time.monotonic()
    try:
        client = connect(transport, address, timeout_s=30)
        client.reset(0)
        client.close()
        outcome = "served"
    except Exception as err:  # noqa: BLE001 - reported
        outcome = f"{type(err).__name__}: {err}"
    took = time.monotonic() - start
    thread.join(30)
    for s in socks:
        s.close()
    return took, f"{outcome} ({len(socks)} of {count} burst connections opened)"


def _hang_ups(transport: str, address: str, count: int) -> None:
    """``count`` clients send a RESET and hang up before the reply (half with a reset, RST)."""
    for i in range(count):
        if transport == "http":
            host, port = address.rsplit(":", 1)
            s = socket.create_connection((host, int(port)), timeout=10)
            s.sendall(b'POST /reset HTTP/1.1\r\nContent-Length: 12\r\n\r\n{"seed": 1}')
        else:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(address)
            s.sendall(P.encode_frame(MsgType.HELLO, 1, P.encode_hello_request()))
        if i % 2:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")
        s.close()


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--drips", type=int, default=200, help="dripping connections")
    parser.add_argument("--transports", default="socket,shm,http")
    args = parser.parse_args()
    setups = {"socket": 0, "shm": 1, "http": 0}
    for transport in args.transports.split(","):
        workers = setups[transport]
        proc, address = _serve(transport, workers)
        try:
            before = rss_kib(proc.pid)
            driver = _Driver(transport, address)
            driver.start()
            start = time.monotonic()
            cut = _drip(transport, address, args.drips, 8.0)
            peak = rss_kib(proc.pid)
            trips = driver.finish()
            print(
                f"{transport}: drip {args.drips} x 64 MiB announced, 1 byte/0.5 s for 8 s: "
                f"{cut}/{args.drips} cut, RSS {before / 1024:.0f} -> {peak / 1024:.0f} MiB, "
                f"real client {trips} in {time.monotonic() - start:.1f} s"
            )
            took, outcome = _burst(transport, address, 500)
            print(f"{transport}: burst of 500: the real client {outcome} in {took:.2f} s")
            _hang_ups(transport, address, 20)
            time.sleep(1)
            print(f"{transport}: RSS after {rss_kib(proc.pid) / 1024:.0f} MiB")
        finally:
            proc.terminate()
            err = proc.communicate(timeout=30)[1]
            print(f"{transport}: server stderr tracebacks: {err.count('Traceback')}")


if __name__ == "__main__":
    main()
