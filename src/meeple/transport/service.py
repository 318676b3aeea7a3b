"""What a front end (socket, HTTP) needs of the env server: the :class:`Service` it calls
and the :class:`Counters` it keeps.

The server (:class:`~meeple.transport.server.EnvServer`) implements ``Service`` and owns the
counters; it picks its front end and hands itself over. Front ends import this module, never
the server, so the two never import each other.
"""

from __future__ import annotations

import threading
from typing import Protocol

import numpy as np

from meeple.transport.protocol import Spaces
from meeple.transport.waiting import WaitPolicy


class Counters:
    """HEALTH's ``bad_requests`` and ``clients``, changed by every connection's thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.bad_requests = 0
        self.clients = 0

    def bad_request(self) -> None:
        with self._lock:
            self.bad_requests += 1

    def connected(self) -> None:
        with self._lock:
            self.clients += 1

    def disconnected(self) -> None:
        with self._lock:
            self.clients -= 1


class Service(Protocol):
    """The env server as its front ends see it (docs/protocol.md: one driver at a time)."""

    transport: str
    server_name: str
    spaces: Spaces
    num_envs: int
    max_body: int
    frame_timeout_s: float
    policy: WaitPolicy
    segment_name: str | None
    counters: Counters

    def acquire(self, owner: object) -> None: ...

    def release(self, owner: object) -> None: ...

    def not_ready(self, owner: object, command: int) -> Exception: ...

    def execute(
        self,
        owner: object,
        command: int,
        *,
        seed: int | None = None,
        actions: np.ndarray | None = None,
    ) -> np.ndarray: ...

    def health(self) -> dict[str, int]: ...
