"""Search spaces in Hydra's sweep-override grammar -> Optuna distributions.

Each entry of ``hydra.sweeper.params`` (and each sweep override on the command line)
is one ``key=value`` override; the value decides what Optuna samples:

==================================  ============================================
``interval(1e-4, 1e-2)``            ``FloatDistribution(1e-4, 1e-2)``
``tag(log, interval(1e-4, 1e-2))``  ``FloatDistribution(1e-4, 1e-2, log=True)``
``int(interval(1, 8))``             ``IntDistribution(1, 8)`` (also ``tag(int, interval(...))``)
``choice(64, 128, relu)``           ``CategoricalDistribution([64, 128, "relu"])``
``range(16, 65, step=16)``          ``IntDistribution(16, 64, step=16)`` (Python's range: stop excluded)
``0.2`` (no sweep)                  a fixed value passed to every trial
==================================  ============================================
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, Override, RangeSweep
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from meeple.errors import ConfigError

ACCEPTED = "interval(a, b), tag(log, interval(a, b)), int(interval(a, b)), choice(x, y, ...), range(start, stop[, step]) or a plain value"


@dataclass
class SearchSpace:
    """What Optuna samples (``distributions``, by parameter name) and the overrides every
    trial gets as written (``fixed``, e.g. ``debug=tiny`` or ``phase.total_frames=50000``)."""

    distributions: dict[str, BaseDistribution] = field(default_factory=dict)
    fixed: list[str] = field(default_factory=list)
    # parameter name -> the key as written in the override (keeps a leading + or ++)
    keys: dict[str, str] = field(default_factory=dict)

    def overrides(self, params: Mapping[str, Any]) -> list[str]:
        """Hydra overrides for one trial: the fixed ones, then the sampled values."""
        sampled = [f"{self.keys.get(name, name)}={format_value(params[name])}" for name in self.distributions]
        return [*self.fixed, *sampled]


def parse_override(text: str) -> Override:
    try:
        (override,) = OverridesParser.create().parse_overrides([text])
    except Exception as err:  # hydra's grammar errors are verbose; keep the line that matters
        raise ConfigError(f"search space entry {text!r} does not parse: {err}; accepted: {ACCEPTED}") from err
    return override


def distribution_from_override(override: Override) -> BaseDistribution | str:
    """An Optuna distribution for a sweep override, or the value text of a plain one."""
    key = override.get_key_element()
    if not override.is_sweep_override():
        return override.get_value_element_as_str()
    value = override.value()
    tags = set(getattr(value, "tags", None) or ())
    unknown = tags - {"log", "int"}
    if unknown:
        raise ConfigError(f"{key}: unknown tag(s) {sorted(unknown)}; accepted tags: log, int")

    if isinstance(value, ChoiceSweep):
        choices = list(value.list)
        for choice in choices:
            if not (choice is None or isinstance(choice, (bool, int, float, str))):
                raise ConfigError(f"{key}: choice values must be numbers, strings, booleans or null, got {choice!r}")
        return CategoricalDistribution(choices)

    if isinstance(value, RangeSweep):
        start, stop, step = value.start, value.stop, value.step
        if step is None or step == 0:
            raise ConfigError(f"{key}: range step must be non-zero")
        values = _range_values(start, stop, step)
        if not values:
            raise ConfigError(f"{key}: range({start}, {stop}, step={step}) is empty")
        if value.shuffle or step < 0:
            return CategoricalDistribution(values)
        low, high = values[0], values[-1]
        if all(isinstance(v, int) for v in (start, stop, step)):
            return IntDistribution(int(low), int(high), step=int(step), log="log" in tags)
        if "log" in tags:
            raise ConfigError(f"{key}: tag(log, ...) needs an integer range or an interval")
        return FloatDistribution(float(low), float(high), step=float(step))

    if isinstance(value, IntervalSweep):
        start, end = value.start, value.end
        if start is None or end is None or not start < end:
            raise ConfigError(f"{key}: interval needs start < end, got interval({start}, {end})")
        log = "log" in tags
        if log and start <= 0:
            raise ConfigError(f"{key}: tag(log, interval({start}, {end})) needs start > 0")
        if "int" in tags or (isinstance(start, int) and isinstance(end, int)):
            return IntDistribution(math.ceil(start), math.floor(end), log=log)
        return FloatDistribution(float(start), float(end), log=log)

    raise ConfigError(f"{key}: {override.input_line!r} is not supported; accepted: {ACCEPTED}")


def _range_values(start: float, stop: float, step: float) -> list[float]:
    values: list = []
    x, i = start, 0
    while (step > 0 and x < stop - 1e-12 * abs(step)) or (step < 0 and x > stop + 1e-12 * abs(step)):
        values.append(x)
        i += 1
        x = start + i * step
        if isinstance(start, float) or isinstance(step, float):
            x = round(x, 12)  # 0.1 + 2 * 0.1 -> 0.3, not 0.30000000000000004
    return values


def parse_search_space(params: Mapping[str, Any] | None, arguments: Iterable[str] = ()) -> SearchSpace:
    """Search space from the sweeper's ``params`` config, then the command line.

    A command-line override of a key replaces the config's entry: ``phase.lr=1e-3`` fixes the
    learning rate for this sweep, ``'phase.lr=interval(1e-4,1e-3)'`` narrows it. Every other
    command-line override (``debug=tiny``, ``tracking.uri=...``) reaches every trial unchanged.
    """
    lines: dict[str, str] = {}  # identity (key@package) -> override text
    for key, value in _flatten(params or {}).items():
        if value is None:
            continue  # `params.x: null` drops an entry
        lines[_identity(parse_override(f"{key}={value}"))] = f"{key}={value}"
    for argument in arguments:
        lines[_identity(parse_override(argument))] = argument

    space = SearchSpace()
    for identity, text in lines.items():
        override = parse_override(text)
        if override.is_sweep_override():
            space.distributions[identity] = distribution_from_override(override)
            space.keys[identity] = override.get_key_element()
        else:
            space.fixed.append(text)
    return space


def _flatten(params: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    # hydra.sweeper.params.phase.lr=... on the command line nests the key; config files use "phase.lr"
    flat: dict[str, Any] = {}
    for key, value in params.items():
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _identity(override: Override) -> str:
    package = f"@{override.package}" if override.package else ""
    return f"{override.key_or_group}{package}"


def format_value(value: Any) -> str:
    """A sampled value as Hydra override text (round-trips through Hydra's grammar)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    text = str(value)
    if _parses_as_string(text):
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _parses_as_string(text: str) -> bool:
    try:
        (override,) = OverridesParser.create().parse_overrides([f"k={text}"])
    except Exception:
        return False
    return not override.is_sweep_override() and override.value() == text


def grid_of(space: SearchSpace) -> dict[str, list[Any]]:
    """Every value of each parameter, for Optuna's GridSampler (intervals have no grid)."""
    grid: dict[str, list[Any]] = {}
    for key, dist in space.distributions.items():
        if isinstance(dist, CategoricalDistribution):
            grid[key] = list(dist.choices)
        elif isinstance(dist, IntDistribution) and not dist.log:
            grid[key] = list(range(dist.low, dist.high + 1, dist.step))
        elif isinstance(dist, FloatDistribution) and dist.step is not None:
            n = int(round((dist.high - dist.low) / dist.step))
            grid[key] = [round(dist.low + i * dist.step, 12) for i in range(n + 1)]
        else:
            raise ConfigError(
                f"sampler=grid needs choice(...) or range(...) for every parameter; {key} is {dist}"
            )
    return grid
