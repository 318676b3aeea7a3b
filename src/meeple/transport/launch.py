"""Starting env servers on demand: ``python -m meeple.serve`` as a child process."""

from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Mapping
from typing import Any

from meeple.errors import ConfigError

READY = "MEEPLE_SERVER_READY "
_counter = itertools.count()
_running: weakref.WeakSet[ServerProcess] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    for server in list(_running):
        server.stop()


STALE_SOCKET_S = 60.0  # a socket file this old that refuses connections belongs to a dead server


def default_folder() -> str:
    folder = os.path.join(tempfile.gettempdir(), f"meeple-{os.getuid()}")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return folder


def default_address(transport: str, env_name: str) -> str:
    if transport == "http":
        return "127.0.0.1:0"
    return os.path.join(default_folder(), f"{env_name}-{os.getpid()}-{next(_counter)}.sock")


def sweep_stale_sockets(folder: str | None = None) -> list[str]:
    """Remove socket files in the default folder that refuse connections and are older than
    :data:`STALE_SOCKET_S` (left by killed servers; default addresses are never reused)."""
    folder = folder or default_folder()
    removed = []
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        try:
            if not name.endswith(".sock") or time.time() - os.stat(path).st_mtime < STALE_SOCKET_S:
                continue
        except FileNotFoundError:
            continue
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(path)
        except (ConnectionRefusedError, FileNotFoundError):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
                removed.append(path)
        except OSError:
            pass
        finally:
            probe.close()
    return removed


class ServerProcess:
    """``python -m meeple.serve`` in a child process; ``address`` once it is ready.

    ``command`` runs another server instead (e.g. the TypeScript one); it must print the
    same ``MEEPLE_SERVER_READY {json}`` line.
    """

    def __init__(
        self,
        env_cfg: Mapping[str, Any],
        *,
        transport: str,
        num_envs: int,
        num_workers: int = 0,
        address: str | None = None,
        start_timeout_s: float = 120.0,
        extra: list[str] = (),
        command: list[str] | None = None,
    ) -> None:
        self.transport = transport
        address = address or default_address(transport, str(env_cfg.get("backend", "env")))
        cmd = command or [
            sys.executable,
            "-m",
            "meeple.serve",
            "--env-json",
            json.dumps(dict(env_cfg)),
            "--parent-pid",
            str(os.getpid()),
            f"transport={transport}",
            f"transport.address={address}",
            f"num_envs={num_envs}",
            f"transport.num_workers={num_workers}",
            *extra,
        ]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=None, text=True)
        self.address = self._wait_ready(start_timeout_s)
        # keep draining stdout so the server never blocks on a full pipe
        threading.Thread(target=self._drain, daemon=True).start()
        _running.add(self)

    def _wait_ready(self, timeout_s: float) -> str:
        result: dict[str, Any] = {}

        def read() -> None:
            for line in self.proc.stdout:
                if line.startswith(READY):
                    result.update(json.loads(line[len(READY) :]))
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(timeout_s)
        if "address" not in result:
            code = None
            if not reader.is_alive():  # stdout closed: the server is exiting
                with contextlib.suppress(subprocess.TimeoutExpired):
                    code = self.proc.wait(timeout=10)
            self.stop()
            if code is not None:
                raise ConfigError(
                    f"the {self.transport} env server exited with code {code} before it was "
                    "ready (its error is printed above)"
                )
            raise ConfigError(
                f"the {self.transport} env server did not start within {timeout_s:.0f} s"
            )
        return result["address"]

    def _drain(self) -> None:
        with contextlib.suppress(Exception):
            for _ in self.proc.stdout:
                pass

    def stop(self, timeout_s: float = 10.0) -> None:
        _running.discard(self)
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
