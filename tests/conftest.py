"""Shared fixtures: configs composed with Hydra's Compose API, independent of the cwd."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from meeple.config.compose import compose_config

REPO = Path(__file__).resolve().parents[1]
# Outside data (Pons' Connect Four sets, ...) beside the project; a user's clone has none.
SHARED_DATA = REPO.parent / "shared" / "data"


def needs_shared(*parts: str) -> pytest.MarkDecorator:
    """Skip a test that reads ``../shared/data/<parts>`` when it is absent, saying so. CI sets
    MEEPLE_REQUIRE_SHARED=1 so that a missing folder fails there instead of skipping."""
    path = SHARED_DATA.joinpath(*parts)
    absent = not path.exists() and os.environ.get("MEEPLE_REQUIRE_SHARED") != "1"
    return pytest.mark.skipif(absent, reason=f"outside test data {path} is absent (a clone without ../shared)")


@pytest.fixture
def compose():
    """compose(["debug=tiny", ...]) -> the DictConfig train.py would run with."""
    return compose_config


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    """Run from an empty folder so outputs/ and mlflow.db land there."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def importable_tests(monkeypatch):
    """Configs may name test helpers by ``_target_: tests.checkpoint.helpers...`` from any cwd."""
    monkeypatch.syspath_prepend(str(REPO))


@pytest.fixture(autouse=True)
def _single_thread():
    # Tests compare numbers across runs; one intra-op thread keeps CPU math repeatable.
    import torch

    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


# Files a test corrupts on purpose (see tests/checkpoint/conftest.py: flip_byte).
CORRUPTED = pytest.StashKey[set]()


@pytest.fixture(autouse=True)
def _sidecars_pass_sha256sum(request):
    """Every ``.sha256`` sidecar a test leaves under its tmp_path passes ``sha256sum -c``."""
    tmp = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield
    if tmp is None or shutil.which("sha256sum") is None:
        return
    corrupted = request.node.stash.get(CORRUPTED, set())
    for sidecar in sorted(tmp.rglob("*.sha256")):
        if sidecar.with_name(sidecar.name.removesuffix(".sha256")).resolve() in corrupted:
            continue
        done = subprocess.run(["sha256sum", "-c", sidecar.name], cwd=sidecar.parent, capture_output=True, text=True)
        assert done.returncode == 0, f"sha256sum -c {sidecar}: {done.stdout}{done.stderr}"


def pytest_collection_modifyitems(config, items):
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


