"""Fixtures for the independent multi-agent topology tests."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Spawned workers import test targets (tests.multiagent.workers) by module name: they inherit
# sys.path from this process, so the repository root must be on it whatever launched pytest.
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# Small, fast run: a few thousand env steps, small buffers, frequent publishes and syncs.
TINY = [
    "+experiment=independent_dqn",
    "tracking=none",
    "phase.total_env_steps=400",
    "phase.learning_starts=100",
    "phase.buffer_size=1000",
    "phase.batch_size=32",
    "phase.publish_interval=5",
    "phase.sync_interval=10",
    "phase.write_interval=10",
    "phase.report_interval=50",
    "phase.eval.episodes=2",
    "phase.stop_timeout_s=10",
]


@pytest.fixture
def tiny_cfg(compose):
    def make(*overrides: str):
        return compose([*TINY, *overrides])

    return make


def shm_mapped(pid: int | None = None) -> set[str]:
    """The /dev/shm files a process has mapped (named semaphores, file-backed shared tensors).

    Only files this run created count, whatever other programs do in /dev/shm meanwhile.
    """
    maps = Path(f"/proc/{pid or os.getpid()}/maps")
    if not maps.exists():
        return set()
    names = set()
    for line in maps.read_text().splitlines():
        path = line.split(maxsplit=5)[-1] if len(line.split()) >= 6 else ""
        if path.startswith("/dev/shm/"):
            names.add(path.removeprefix("/dev/shm/").removesuffix(" (deleted)"))
    return names


def shm_leftovers(names: set[str]) -> set[str]:
    """Which of ``names`` still exist in /dev/shm."""
    return {n for n in names if os.path.exists(f"/dev/shm/{n}")}
