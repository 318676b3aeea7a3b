"""Samplers, pruners and storages by name, with the config's keyword arguments."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import optuna

from meeple.errors import ConfigError
from meeple.sweep.space import SearchSpace, grid_of

SAMPLERS = ("tpe", "cmaes", "random", "grid", "qmc", "gp")
PRUNERS = ("median", "percentile", "halving", "hyperband", "threshold", "none")


def make_sampler(name: str, *, seed: int | None, kwargs: Mapping[str, Any] | None, space: SearchSpace) -> optuna.samplers.BaseSampler:
    """``tpe`` (default), ``cmaes``, ``random``, ``grid`` (every choice/range combination), ``qmc``, ``gp``."""
    try:
        return _make_sampler(str(name).lower(), seed, dict(kwargs or {}), space)
    except TypeError as err:  # kwargs meant for another sampler
        raise ConfigError(
            f"hydra.sweeper.sampler.kwargs do not fit sampler {name}: {err} "
            "(clear them with 'hydra.sweeper.sampler.kwargs={}')"
        ) from err


def _make_sampler(name: str, seed: int | None, kwargs: dict[str, Any], space: SearchSpace) -> optuna.samplers.BaseSampler:
    name = str(name).lower()
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed, **kwargs)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed, **kwargs)
    if name == "grid":
        return optuna.samplers.GridSampler(grid_of(space), seed=seed, **kwargs)
    if name == "qmc":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.QMCSampler(seed=seed, **kwargs)
    if name == "gp":
        return optuna.samplers.GPSampler(seed=seed, **kwargs)
    if name == "cmaes":
        try:
            import cmaes  # noqa: F401  (optuna imports it lazily and fails late)
        except ImportError as err:
            raise ConfigError("sampler=cmaes needs the `cmaes` package: pip install cmaes") from err
        return optuna.samplers.CmaEsSampler(seed=seed, **kwargs)
    raise ConfigError(f"hydra.sweeper.sampler.name={name} is unknown; accepted: {', '.join(SAMPLERS)}")


def make_pruner(name: str | None, kwargs: Mapping[str, Any] | None = None) -> optuna.pruners.BasePruner:
    """``median`` (default), ``percentile``, ``halving`` (successive halving), ``hyperband``,
    ``threshold`` or ``none``; ``kwargs`` go to the Optuna pruner as they are."""
    kwargs = dict(kwargs or {})
    name = "none" if name is None else str(name).lower()
    factories = {
        "median": optuna.pruners.MedianPruner,
        "percentile": optuna.pruners.PercentilePruner,
        "halving": optuna.pruners.SuccessiveHalvingPruner,
        "hyperband": optuna.pruners.HyperbandPruner,
        "threshold": optuna.pruners.ThresholdPruner,
        "none": optuna.pruners.NopPruner,
    }
    if name not in factories:
        raise ConfigError(f"hydra.sweeper.pruner.name={name} is unknown; accepted: {', '.join(PRUNERS)}")
    try:
        return factories[name](**kwargs)
    except TypeError as err:
        raise ConfigError(f"hydra.sweeper.pruner.kwargs for {name}: {err}") from err


def make_storage(url: str | None, *, heartbeat_interval: int | None = None, grace_period: int | None = None) -> optuna.storages.BaseStorage | None:
    """An RDB storage for ``sqlite:///...``/``postgresql://...``/``mysql://...`` URLs (None: in memory).

    With ``heartbeat_interval`` each running trial records a heartbeat; trials of a worker
    that died (no heartbeat for ``grace_period`` seconds) are marked FAIL when a worker asks
    for the next trial, so a crashed sweep resumes cleanly.
    """
    if not url:
        return None
    url = str(url)
    engine_kwargs: dict[str, Any] = {}
    if url.startswith("sqlite:///"):
        # sqlite cannot create the folder that holds the database file.
        Path(url.removeprefix("sqlite:///")).expanduser().parent.mkdir(parents=True, exist_ok=True)
        # several local workers share one file: wait for the lock instead of failing at once
        engine_kwargs["connect_args"] = {"timeout": 60}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # heartbeat_interval
        return optuna.storages.RDBStorage(
            url,
            engine_kwargs=engine_kwargs or None,
            heartbeat_interval=heartbeat_interval or None,
            grace_period=grace_period if heartbeat_interval else None,
        )


def redact_url(url: str | None) -> str:
    """A storage URL safe to print and log (password masked)."""
    if not url:
        return "in-memory"
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url.split("@")[-1] if "@" in url else url
