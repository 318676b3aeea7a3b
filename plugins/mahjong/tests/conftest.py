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


def train(cwd, *overrides: str) -> None:
    """``python train.py <overrides> debug=tiny tracking=none`` in ``cwd`` (must exit 0)."""
    import subprocess
    import sys
    from pathlib import Path

    script = str(Path(__file__).resolve().parents[3] / "train.py")
    done = subprocess.run([sys.executable, script, *overrides, "debug=tiny", "tracking=none"], cwd=cwd,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.fixture
def tiny_train():
    """:func:`train` for tests that run one more recipe in their own folder."""
    return train


@pytest.fixture(scope="session")
def mahjong_runs(tmp_path_factory):
    """{experiment: run directory} of ``+experiment=phase2 pipeline.start=phase1`` (phase 1 ->
    teacher -> student) and then ``+experiment=phase3`` (the league, from that newest phase-2
    run's student, with its phase-1 gate as a second anchor), tiny, in one folder; built once per
    test session, also when pytest-xdist runs the modules that read it in different workers
    (their temp folders share a parent)."""
    import json
    import os
    import shutil

    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    cwd = shared / "mahjong_pipeline"
    with FileLock(str(shared / "mahjong_pipeline.lock")):
        if not (cwd / "built").is_file():
            shutil.rmtree(cwd, ignore_errors=True)  # a failed earlier attempt
            cwd.mkdir()
            train(cwd, "+experiment=phase2", "pipeline.start=phase1")
            (phase2,) = (cwd / "outputs" / "runs").iterdir()
            train(cwd, "+experiment=phase3",
                  f"+pipeline.stages.league.phase.league.anchors.phase1={phase2 / 'gates' / 'phase1.pt'}")
            (cwd / "built").touch()
    runs = (cwd / "outputs" / "runs").iterdir()
    return {json.loads((r / "run.json").read_text())["experiment"]: r for r in runs}
