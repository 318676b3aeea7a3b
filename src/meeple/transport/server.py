"""The env server: N env slots (in this process or a pool of worker processes) behind a
socket, HTTP or shared-memory front end (docs/protocol.md).

Only one connection drives the envs at a time (the first to RESET, or to attach shared
memory); other connections may still ask HELLO / SPACES / HEALTH. A bad request costs only
its own connection. ``close()`` (SIGINT/SIGTERM in ``python -m meeple.serve``) stops the
workers and removes the socket file and the shared-memory segment.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Mapping
from multiprocessing.connection import wait as wait_for_objects
from typing import Any

import numpy as np

from meeple.envs.array import make_array_env
from meeple.errors import ConfigError
from meeple.transport.host import EnvHost
from meeple.transport.http import HttpFrontend
from meeple.transport.launch import sweep_stale_sockets
from meeple.transport.protocol import (
    DEFAULT_MAX_BODY,
    STEP_MULTI,
    ErrorCode,
    MsgType,
    ProtocolError,
    Spaces,
)
from meeple.transport.service import Counters
from meeple.transport.shm import (
    STATE_CLOSING,
    STATE_READY,
    W_COUNT,
    W_DOORBELL,
    W_FIRST,
    W_PID,
    Segment,
    ShmChannel,
    pid_alive,
    segment_name,
    sweep_stale_segments,
    unlink_segment,
    worker_main,
)
from meeple.transport.socket import SocketFrontend
from meeple.transport.waiting import WaitPolicy, futex_wake

log = logging.getLogger(__name__)

# each transport's front end (shm's control plane is the socket's frames)
FRONTENDS = {"socket": SocketFrontend, "http": HttpFrontend, "shm": SocketFrontend}
TRANSPORTS = tuple(FRONTENDS)
ENV_COMMANDS = (MsgType.RESET, MsgType.STEP, MsgType.STEP_MULTI, MsgType.OBSERVE)


class LocalSlots:
    """All env slots in the server process (``num_workers=0``): no hop between I/O and env."""

    num_workers = 0

    def __init__(self, env_cfg: Mapping[str, Any], num_envs: int) -> None:
        self.env = make_array_env(env_cfg, num_envs)
        self.spaces = self.env.spaces
        self.host = EnvHost(self.env)
        n, seats = num_envs, self.spaces.num_seats
        self.single = self.spaces.new_records(n)
        self.multi = self.spaces.new_records(n * seats).reshape(n, seats)

    def request(
        self, command: int, *, seed: int | None = None, actions: np.ndarray | None = None
    ) -> np.ndarray:
        self.host.execute(command, self.single, self.multi, seed=seed, actions=actions)
        return self.multi if command == STEP_MULTI else self.single

    def sync(self) -> None:
        pass

    def counters(self) -> tuple[int, int]:
        return self.host.steps, self.host.env_errors

    def close(self) -> None:
        self.env.close()


class PooledSlots:
    """Env slots split over worker processes that serve a shared-memory segment."""

    def __init__(
        self,
        env_cfg: Mapping[str, Any],
        num_envs: int,
        num_workers: int,
        name: str,
        policy: WaitPolicy,
        start_timeout_s: float = 120.0,
    ) -> None:
        if not 1 <= num_workers <= num_envs:
            raise ConfigError(
                f"num_workers={num_workers} must be between 1 and num_envs={num_envs}"
            )
        probe = make_array_env(env_cfg, 1)
        self.spaces = probe.spaces.with_num_envs(num_envs)
        probe.close()
        self.num_workers = num_workers
        self.segment = Segment.create(name, self.spaces, num_workers)
        self.procs: list[mp.process.BaseProcess] = []
        self._closing = threading.Event()
        self._watcher: threading.Thread | None = None
        try:
            self._start(env_cfg, policy, start_timeout_s)
            self.channel = ShmChannel(name, policy)
        except BaseException:
            self.close()
            raise

    def watch(self, on_death: Callable[[str], None]) -> None:
        """Call ``on_death(message)`` (once, from a watcher thread) when a worker dies.

        The dead worker is reaped at once (no zombie) and the segment is marked closing, so
        the other workers and every client stop waiting on it. Its envs are gone with it:
        the server shuts down rather than answer with envs whose episodes were lost.
        """
        self._watcher = threading.Thread(
            target=self._watch, args=(on_death,), name="meeple-worker-watch", daemon=True
        )
        self._watcher.start()

    def _watch(self, on_death: Callable[[str], None]) -> None:
        sentinels = {proc.sentinel: w for w, proc in enumerate(self.procs)}
        while not self._closing.is_set():
            ready = wait_for_objects(list(sentinels), timeout=0.2)
            if not ready or self._closing.is_set():
                continue
            w = sentinels[ready[0]]
            proc = self.procs[w]
            proc.join()  # reap: no zombie while the server shuts down
            self.segment.state = STATE_CLOSING
            code = proc.exitcode
            how = (
                f"was killed by {signal.Signals(-code).name}"
                if code is not None and code < 0
                else f"exited with code {code}"
            )
            on_death(f"env worker {w} (pid {proc.pid}) {how}")
            return

    def _start(self, env_cfg: Mapping[str, Any], policy: WaitPolicy, timeout_s: float) -> None:
        seg, words = self.segment, self.segment.words
        bounds = np.linspace(0, self.spaces.num_envs, self.num_workers + 1).astype(int)
        ctx = mp.get_context("spawn")  # no inherited threads or torch state
        for w in range(self.num_workers):
            words[seg.word(w, W_FIRST)], words[seg.word(w, W_COUNT)] = (
                bounds[w],
                bounds[w + 1] - bounds[w],
            )
            proc = ctx.Process(
                target=worker_main,
                args=(seg.name, w, dict(env_cfg), policy),
                name=f"meeple-env-worker-{w}",
                daemon=True,
            )
            proc.start()
            self.procs.append(proc)
        deadline = time.monotonic() + timeout_s
        for w, proc in enumerate(self.procs):
            while not words[seg.word(w, W_PID)]:
                if not proc.is_alive():
                    code, text = seg.error(w)
                    raise ConfigError(
                        text or f"env worker {w} exited with code {proc.exitcode} while starting"
                    )
                if time.monotonic() > deadline:
                    raise TimeoutError(f"env worker {w} did not start within {timeout_s:.0f} s")
                time.sleep(0.01)
        seg.state = STATE_READY

    def request(
        self, command: int, *, seed: int | None = None, actions: np.ndarray | None = None
    ) -> np.ndarray:
        return self.channel.request(command, seed=seed, actions=actions)

    def sync(self) -> None:
        self.channel.sync()

    def counters(self) -> tuple[int, int]:
        return self.segment.steps(), self.segment.env_errors()

    def close(self) -> None:
        self._closing.set()
        if self._watcher is not None and self._watcher is not threading.current_thread():
            self._watcher.join(timeout=5)
        seg = self.segment
        seg.state = STATE_CLOSING
        for w in range(self.num_workers):
            futex_wake(seg.address(seg.word(w, W_DOORBELL)))
        for proc in self.procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5)
        seg.unlink()
        if getattr(self, "channel", None) is not None:
            self.channel.close()
        seg.close()


def claim_address(path: str, name: str | None) -> None:
    """Remove a socket file / segment left by a crashed server; refuse ones in use."""
    if name is not None:
        pid = Segment.read_server_pid(name)
        if pid is not None:
            if pid != os.getpid() and pid_alive(pid):
                raise ConfigError(
                    f"shared-memory segment {name} belongs to the running server pid {pid}; "
                    "stop it or choose another transport.address"
                )
            log.warning(
                "removing stale shared-memory segment %s left by dead server pid %d", name, pid
            )
            unlink_segment(name)
    if os.path.exists(path):
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(path)
        except OSError:
            log.warning("removing stale socket file %s", path)
            os.unlink(path)
        else:
            raise ConfigError(
                f"a server is already listening on {path}; choose another transport.address"
            )
        finally:
            probe.close()


class EnvServer:
    """Hosts ``num_envs`` envs of ``env_cfg`` for one transport. ``start()``, then ``close()``."""

    def __init__(
        self,
        env_cfg: Mapping[str, Any],
        *,
        transport: str,
        address: str,
        num_envs: int,
        num_workers: int = 0,
        max_body: int = DEFAULT_MAX_BODY,
        frame_timeout_s: float = 5.0,
        policy: WaitPolicy | None = None,
    ) -> None:
        if transport not in TRANSPORTS:
            raise ConfigError(
                f"transport={transport!r} cannot be served; accepted: {', '.join(TRANSPORTS)}"
            )
        if transport == "shm" and num_workers < 1:
            raise ConfigError("transport=shm needs env worker processes: set num_workers >= 1")
        self.env_cfg, self.transport, self.address = dict(env_cfg), transport, address
        self.num_envs, self.num_workers = num_envs, num_workers
        self.max_body, self.frame_timeout_s = max_body, frame_timeout_s
        self.policy = policy or WaitPolicy()
        self.server_name = f"meeple/{env_cfg.get('backend', env_cfg.get('array_env', 'env'))}"
        self.segment_name = None
        if num_workers > 0:  # HTTP ports may be ephemeral: its segment is per server process
            self.segment_name = segment_name(
                address if transport != "http" else f"http:{os.getpid()}:{address}"
            )
        self.counters = Counters()
        self._lock = threading.Lock()
        self._driver: object | None = None
        self.slots: LocalSlots | PooledSlots | None = None
        self.frontend: SocketFrontend | HttpFrontend | None = None
        self._closed = False
        self.failure: str | None = None  # why the server shut itself down (a worker died)
        # called (from a watcher thread) after a failure shut the server down; the CLI exits
        self.on_failure: Callable[[str], None] | None = None

    # -- lifecycle --
    def start(self) -> EnvServer:
        sweep_stale_segments()  # crash leftovers of other servers, wherever they listened
        removed = sweep_stale_sockets()
        if removed:
            log.warning("removed %d stale socket file(s) of dead servers", len(removed))
        if self.transport != "http":
            claim_address(self.address, self.segment_name)
        elif self.segment_name:
            claim_address("", self.segment_name)
        if self.num_workers > 0:
            self.slots = PooledSlots(
                self.env_cfg, self.num_envs, self.num_workers, self.segment_name, self.policy
            )
            self.slots.watch(self._worker_died)
        else:
            self.slots = LocalSlots(self.env_cfg, self.num_envs)
        self.spaces: Spaces = self.slots.spaces
        n, seats = self.num_envs, self.spaces.num_seats
        self._single = self.spaces.new_records(n)
        self._multi = self.spaces.new_records(n * seats).reshape(n, seats)
        try:
            self.frontend = FRONTENDS[self.transport](self, self.address)
            self.address = self.frontend.address  # HTTP: the port an ephemeral 0 became
            self.frontend.start()
        except BaseException:
            self.close()
            raise
        log.info(
            "serving %d %s envs (%d worker processes) over %s at %s",
            n,
            self.spaces.env_name,
            self.num_workers,
            self.transport,
            self.address,
        )
        return self

    def _worker_died(self, what: str) -> None:
        failure = (
            f"{what}; the env server at {self.address} shut down (that worker's envs and their "
            "episodes are lost): restart the server"
        )
        log.error("%s", failure)
        self.close()
        self.failure = failure  # set once everything is stopped and removed
        if self.on_failure is not None:
            self.on_failure(self.failure)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.frontend is not None:
            self.frontend.close()
        if self.slots is not None:
            self.slots.close()
        if self.transport != "http":
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.address)
        if self.segment_name:
            unlink_segment(self.segment_name)

    def __enter__(self) -> EnvServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- requests (shared by the front ends) --
    def acquire(self, owner: object) -> None:
        with self._lock:
            if self._driver is None:
                self._driver = owner
                self.slots.sync()
            elif self._driver is not owner:
                raise _busy()

    def not_ready(self, owner: object, command: int) -> ProtocolError:
        """The error for a STEP from a connection that has not sent RESET: ``busy`` while
        another client drives, else ``not_ready`` (the envs hold someone else's episodes)."""
        driver = self._driver
        if driver is not None and driver is not owner:
            return _busy()
        return ProtocolError(
            ErrorCode.NOT_READY,
            f"{MsgType(command).name} before RESET; send RESET first (a connection steps "
            "only after its own RESET: the envs may hold another client's episodes)",
        )

    def release(self, owner: object) -> None:
        with self._lock:
            if self._driver is owner:
                self._driver = None

    def execute(
        self,
        owner: object,
        command: int,
        *,
        seed: int | None = None,
        actions: np.ndarray | None = None,
    ) -> np.ndarray:
        """Run one env command for ``owner``; packed records (``[N]``, or ``[N * seats]``)."""
        if self._driver is not owner:  # only the driver's own connection can change it now
            self.acquire(owner)
        n, seats = self.num_envs, self.spaces.num_seats
        if actions is not None:
            expected = n * seats if command == STEP_MULTI else n
            if actions.size != expected:
                raise ProtocolError(
                    ErrorCode.MALFORMED,
                    f"{MsgType(command).name} carries {actions.size} actions; "
                    f"expected {expected} (num_envs={n}"
                    + (f" x num_seats={seats})" if command == MsgType.STEP_MULTI else ")"),
                )
        records = self.slots.request(command, seed=seed, actions=actions)
        if isinstance(self.slots, LocalSlots):
            return records if records.ndim == 1 else records.reshape(-1)
        out = self._multi if command == STEP_MULTI else self._single
        out[...] = records  # strided shared-memory slots -> packed records
        return out.reshape(-1)

    def health(self) -> dict[str, int]:
        steps, env_errors = self.slots.counters()
        return dict(
            steps=steps,
            env_errors=env_errors,
            bad_requests=self.counters.bad_requests,
            num_workers=self.num_workers,
            clients=self.counters.clients,
        )


def _busy() -> ProtocolError:
    return ProtocolError(
        ErrorCode.BUSY,
        "another client drives these envs; one driver at a time "
        "(HELLO, SPACES and HEALTH are always answered)",
    )
