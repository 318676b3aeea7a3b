"""Compose the project's configs outside ``train.py`` (tests, benchmarks, notebooks)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, open_dict

import meeple


def conf_dir() -> Path:
    """The project's ``conf/``: ``$MEEPLE_CONF_DIR`` or the checkout meeple runs from."""
    if env := os.environ.get("MEEPLE_CONF_DIR"):
        return Path(env).resolve()
    # src/meeple/__init__.py -> repository root (editable install from a checkout)
    found = Path(meeple.__file__).resolve().parents[2] / "conf"
    if not found.is_dir():
        raise FileNotFoundError(f"meeple's conf/ is not at {found} (meeple installed outside its checkout?); "
                                "accepted: an editable install (pip install -e .) or MEEPLE_CONF_DIR=<checkout>/conf")
    return found


def compose_config(overrides: Sequence[str] = (), *, config_name: str = "train") -> DictConfig:
    """The config ``python train.py <overrides>`` would run with (without Hydra's runtime keys)."""
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = compose(config_name=config_name, overrides=list(overrides), return_hydra_config=True)
    # As under train.py: the run's Hydra settings (its command-line overrides among them,
    # which win over debug sizes) are readable through HydraConfig, not from the config.
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg


def group_options(group: str) -> list[str]:
    """The options of config group ``group`` that Hydra finds: the core's and every installed
    plugin's (recipes live with their game, so ``conf/<group>/`` alone is not the list)."""
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        return sorted(GlobalHydra.instance().config_loader().get_group_options(group))
