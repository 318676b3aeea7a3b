"""Opponent pool: weights-only models with JSON sidecars and a version counter that only grows."""

from __future__ import annotations

import json

import pytest
import torch

from meeple.checkpoint.io import ChecksumMismatch, sidecar_path
from meeple.checkpoint.pool import OpponentPool


def test_pool_models_sidecars_and_monotonic_versions(tmp_path, flip_byte):
    folder = tmp_path / "phase3" / "opponent_pool"
    pool = OpponentPool(folder)
    first = pool.add({"w": torch.ones(3)}, step=120, phase=3, rating_mu=25.0, rating_sigma=8.3, games=10, win_rate=0.5)
    second = pool.add({"w": torch.zeros(3)}, step=240, phase=3)
    assert (first.version, second.version) == (1, 2)
    assert first.file == "pool_v0001_step00000120.pt" and sidecar_path(folder / first.file).is_file()
    meta = json.loads((folder / "pool_v0001_step00000120.pt.meta.json").read_text())
    assert meta["version"] == 1 and meta["step"] == 120 and meta["phase"] == 3
    assert meta["rating_mu"] == 25.0 and meta["rating_sigma"] == 8.3 and meta["games"] == 10
    assert meta["win_rate"] == 0.5 and meta["promoted_utc"].endswith("+00:00")
    assert torch.equal(pool.load(1)["w"], torch.ones(3))

    pool.update(1, games=30, rating_mu=27.5)
    assert pool.entry(1).games == 30
    with pytest.raises(ValueError, match="accepted"):
        pool.update(1, step=9)

    # Survives restarts, and deleted or never-finished versions are never reused.
    pool.remove(2)
    (folder / "pool_v0003_step00000300.pt.tmp").write_bytes(b"died mid-write")
    restarted = OpponentPool(folder)
    assert not list(folder.glob("*.tmp"))
    assert restarted.add({"w": torch.ones(1)}, step=360, phase=3).version == 3
    (folder / "VERSION").unlink()  # counter lost: files still bound it
    assert OpponentPool(folder).add({"w": torch.ones(1)}, step=480, phase=3).version == 4
    assert [e.version for e in OpponentPool(folder).entries()] == [1, 3, 4]

    flip_byte(folder / first.file)
    with pytest.raises(ChecksumMismatch):
        restarted.load(1)
