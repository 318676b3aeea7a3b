"""Samplers, pruners and storages by name, with the config's keyword arguments."""

from __future__ import annotations

import inspect
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
    """``tpe`` (default), ``cmaes``, ``random``, ``grid`` (every choice/range combination), ``qmc``, ``gp``.

    ``kwargs`` holds options per sampler name (``{tpe: {n_startup_trials: 5}, gp: {...}}``): only
    the chosen sampler's are used, so switching ``name`` on the command line never hands one
    sampler's options to another.
    """
    name = str(name).lower()
    if name not in SAMPLERS:
        raise ConfigError(f"hydra.sweeper.sampler.name={name} is unknown; accepted: {', '.join(SAMPLERS)}")
    options = options_for("sampler", name, kwargs, SAMPLERS)
    _check_options("sampler", name, options, _sampler_class(name), set_by_meeple={"seed", "search_space"})
    try:
        return _make_sampler(name, seed, options, space)
    except ConfigError:
        raise
    except (TypeError, ValueError) as err:  # a value Optuna refuses
        raise ConfigError(f"hydra.sweeper.sampler.kwargs.{name}: {err}") from err


def _sampler_class(name: str) -> type:
    return {
        "tpe": optuna.samplers.TPESampler,
        "random": optuna.samplers.RandomSampler,
        "grid": optuna.samplers.GridSampler,
        "qmc": optuna.samplers.QMCSampler,
        "gp": optuna.samplers.GPSampler,
        "cmaes": optuna.samplers.CmaEsSampler,
    }[name]


def _make_sampler(name: str, seed: int | None, kwargs: dict[str, Any], space: SearchSpace) -> optuna.samplers.BaseSampler:
    if name == "grid":
        return optuna.samplers.GridSampler(grid_of(space), seed=seed, **kwargs)
    if name == "qmc":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.QMCSampler(seed=seed, **kwargs)
    if name == "cmaes":
        try:
            import cmaes  # noqa: F401  (optuna imports it lazily and fails late)
        except ImportError as err:
            raise ConfigError("sampler=cmaes needs the `cmaes` package: pip install cmaes") from err
    return _sampler_class(name)(seed=seed, **kwargs)


_PRUNER_CLASSES = {
    "median": optuna.pruners.MedianPruner,
    "percentile": optuna.pruners.PercentilePruner,
    "halving": optuna.pruners.SuccessiveHalvingPruner,
    "hyperband": optuna.pruners.HyperbandPruner,
    "threshold": optuna.pruners.ThresholdPruner,
    "none": optuna.pruners.NopPruner,
}


def make_pruner(name: str | None, kwargs: Mapping[str, Any] | None = None) -> optuna.pruners.BasePruner:
    """``median`` (default), ``percentile``, ``halving`` (successive halving), ``hyperband``,
    ``threshold`` or ``none``; ``kwargs`` holds options per pruner name
    (``{median: {n_startup_trials: 3}, halving: {min_resource: 1000}}``), only the chosen one's are used."""
    name = "none" if name is None else str(name).lower()
    if name not in _PRUNER_CLASSES:
        raise ConfigError(f"hydra.sweeper.pruner.name={name} is unknown; accepted: {', '.join(PRUNERS)}")
    options = options_for("pruner", name, kwargs, PRUNERS)
    cls = _PRUNER_CLASSES[name]
    _check_options("pruner", name, options, cls)
    try:
        return cls(**options)
    except (TypeError, ValueError) as err:  # a missing required option or a value out of range
        raise ConfigError(f"hydra.sweeper.pruner.kwargs.{name}: {err}") from err


def options_for(kind: str, name: str, kwargs: Mapping[str, Any] | None, names: tuple[str, ...]) -> dict[str, Any]:
    """The options of sampler/pruner ``name`` from ``kwargs``, which is keyed by name."""
    kwargs = dict(kwargs or {})
    stray = [key for key in kwargs if key not in names]
    if stray:
        raise ConfigError(
            f"hydra.sweeper.{kind}.kwargs is keyed by {kind} name ({', '.join(names)}), got {', '.join(stray)}; "
            f"e.g. hydra.sweeper.{kind}.kwargs.{name}.{stray[0]}=..."
        )
    options = kwargs.get(name) or {}
    if not isinstance(options, Mapping):
        raise ConfigError(f"hydra.sweeper.{kind}.kwargs.{name} must be a mapping of options, got {options!r}")
    return dict(options)


def _check_options(kind: str, name: str, options: Mapping[str, Any], cls: type,
                   set_by_meeple: frozenset[str] | set[str] = frozenset()) -> None:
    """Every option must be a keyword of the Optuna class (meeple sets ``set_by_meeple`` itself)."""
    accepted = [p for p in inspect.signature(cls).parameters if p not in set_by_meeple]
    unknown = [key for key in options if key not in accepted]
    if unknown:
        raise ConfigError(
            f"hydra.sweeper.{kind}.kwargs.{name}.{unknown[0]} is not an option of {cls.__name__}; "
            f"accepted: {', '.join(accepted) or 'none'}"
        )


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
