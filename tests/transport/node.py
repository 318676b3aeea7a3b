"""The TypeScript reference server (plugins/remote/node): built with npm when missing or older
than its sources (``npm ci``, then ``npm run build``: the shared-memory addon with g++, then
``tsc``), once for all test workers (``meeple.transport.node.build`` holds a file lock)."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

from meeple.errors import ConfigError
from meeple.transport import node
from meeple.transport.launch import ServerProcess, default_address


@functools.cache  # test modules share the build
def build() -> Path:
    """``npm ci`` (if needed) and ``npm run build`` (if stale); fails (never skips) without
    node/npm/g++. Not forced: another test worker may be running servers from dist/."""
    try:
        return node.build()
    except ConfigError as err:
        pytest.fail(f"{err} (the TypeScript server tests are part of CI and are not skipped)")


def start(
    dist: Path,
    transport: str,
    num_envs: int,
    address: str | None = None,
    *,
    game: str = "connect4",
    game_module: str | None = None,
    num_workers: int | None = None,
    extra: list[str] = (),
) -> ServerProcess:
    """``node dist/server.js`` for ``transport``; ``num_workers`` None is the server's default
    (1 worker thread for shm, none otherwise); ``extra``: more command-line options."""
    address = address or default_address(transport, f"node-{game}")
    command = ["node", str(dist / "server.js"), "--transport", transport, "--address", address]
    command += ["--num-envs", str(num_envs), "--parent-pid", str(os.getpid())]
    command += ["--game-module", game_module] if game_module else ["--game", game]
    if num_workers is not None:
        command += ["--num-workers", str(num_workers)]
    return ServerProcess(
        {},
        transport=transport,
        num_envs=num_envs,
        address=address,
        command=[*command, *extra],
        start_timeout_s=60,
    )
