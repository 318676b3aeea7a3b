"""The user's command-line values (whether the run's seed was chosen there)."""

from __future__ import annotations

from typing import Any


def command_line_values() -> list[tuple[str, Any]]:
    """``(key, value)`` of each plain ``key=value`` override of this run (not group choices,
    deletions or sweeps), in order; empty when Hydra did not compose the config."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if not HydraConfig.initialized():
        return []
    hydra = HydraConfig.get()
    groups = set(hydra.runtime.choices)
    values = []
    for override in OverridesParser.create().parse_overrides(list(hydra.overrides.task)):
        if override.is_delete() or override.is_sweep_override() or override.package is not None:
            continue
        key = override.key_or_group
        if key in groups or "/" in key:
            continue
        values.append((key, override.value()))
    return values

