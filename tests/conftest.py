"""Shared fixtures: configs composed with Hydra's Compose API, independent of the cwd."""

from __future__ import annotations

from pathlib import Path

import pytest

from meeple.config.compose import compose_config

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def compose():
    """compose(["debug=tiny", ...]) -> the DictConfig train.py would run with."""
    return compose_config


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    """Run from an empty folder so outputs/ and mlflow.db land there."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(autouse=True)
def _single_thread():
    # Tests compare numbers across runs; one intra-op thread keeps CPU math repeatable.
    import torch

    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def pytest_collection_modifyitems(config, items):
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


