"""Shared fixtures of the mahjong plugin's tests."""

from __future__ import annotations

import contextlib
import io

import pytest


@pytest.fixture(scope="session")
def selfplay_logs(tmp_path_factory):
    """Three greedy self-play games as MJAI logs (python -m meeple_mahjong.selfplay)."""
    from meeple_mahjong.selfplay import main

    out = tmp_path_factory.mktemp("selfplay") / "logs"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["--games", "3", "--seed", "0", "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="session")
def tiny_corpus(selfplay_logs, tmp_path_factory):
    """(manifest, shards dir) of the three self-play games: no filters, one game held out,
    shards of 500 samples."""
    from meeple_mahjong.corpus import manifest, shards

    root = tmp_path_factory.mktemp("corpus")
    m = root / "manifest.sqlite"
    manifest.scan([str(selfplay_logs)], m, val_fraction=1 / 3, filters=None, progress=False)
    shards.build(m, root / "shards", shard_size=500, progress=False)
    return m, root / "shards"
