"""Checkpoint test fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import CORRUPTED


@pytest.fixture
def flip_byte(request):
    """flip_byte(path, offset=None): invert one byte of a file (the sidecar check skips it)."""

    def flip(path: Path, offset: int | None = None) -> Path:
        path = Path(path).resolve()
        data = bytearray(path.read_bytes())
        offset = len(data) // 2 if offset is None else offset
        data[offset] ^= 0xFF
        path.write_bytes(bytes(data))
        request.node.stash.setdefault(CORRUPTED, set()).add(path)
        return path

    return flip

