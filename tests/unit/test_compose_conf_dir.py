"""Where compose_config (benchmarks, notebooks) finds conf/: the checkout, or MEEPLE_CONF_DIR."""

import pytest

import meeple
from meeple.config import compose


def test_conf_dir_is_the_checkouts(monkeypatch):
    monkeypatch.delenv("MEEPLE_CONF_DIR", raising=False)
    assert (compose.conf_dir() / "train.yaml").is_file()


def test_installed_outside_a_checkout_names_the_fix(monkeypatch, tmp_path):
    """A non-editable install (seen on a GPU machine: site-packages/meeple) has no conf/ beside it."""
    monkeypatch.delenv("MEEPLE_CONF_DIR", raising=False)
    monkeypatch.setattr(meeple, "__file__", str(tmp_path / "site" / "meeple" / "__init__.py"))
    with pytest.raises(FileNotFoundError, match="MEEPLE_CONF_DIR=<checkout>/conf"):
        compose.conf_dir()
    monkeypatch.setenv("MEEPLE_CONF_DIR", str(tmp_path))
    assert compose.conf_dir() == tmp_path.resolve()
