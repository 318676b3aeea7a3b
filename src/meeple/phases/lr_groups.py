"""A learning rate per group of parameters (``phase.lr_groups``), e.g. a large one for weights
that start at zero in a stage carried from a gate (a new head, a new input's convolution) and
the phase's small one for the cloned body: Adam's step is about the learning rate whatever the
gradient's size, so one rate cannot both move the new weights and spare the old ones."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

from meeple.errors import ConfigError

if TYPE_CHECKING:  # the schema imports LRGroup: config validation stays torch-free
    import torch


@dataclass
class LRGroup:
    params: list[str] = field(default_factory=list)  # glob patterns on parameter names
    lr: float = 1e-3


def lr_param_groups(params: Iterable[torch.nn.Parameter], names: Mapping[int, str],
                    groups: Mapping[str, LRGroup]) -> list[dict]:
    """Optimiser parameter groups: the parameters whose name (``names[id(p)]``) matches one of a
    group's patterns at that group's ``lr``, the rest in a first group at the optimiser's own.
    A pattern that matches nothing, or a parameter in two groups, is a config error."""
    params = list(params)
    taken: dict[int, str] = {}
    out = []
    for group_name, group in groups.items():
        where = f"phase.lr_groups.{group_name}"
        if not group.params:
            raise ConfigError(f"{where}.params is empty; accepted: glob patterns on parameter names, "
                              f"e.g. ['*oracle_stem*']")
        if not group.lr > 0:
            raise ConfigError(f"{where}.lr={group.lr!r}; accepted: a float > 0")
        members = []
        for pattern in group.params:
            hits = [p for p in params if fnmatchcase(names.get(id(p), ""), pattern)]
            if not hits:
                some = ", ".join(sorted(names.get(id(p), "?") for p in params)[:6])
                raise ConfigError(f"{where}.params: {pattern!r} matches no parameter; the names look like "
                                  f"{some}, ...")
            for p in hits:
                if taken.get(id(p), group_name) != group_name:
                    raise ConfigError(f"{where}.params: {names[id(p)]} is already in lr group "
                                      f"{taken[id(p)]!r}; accepted: each parameter in one group")
                if id(p) not in taken:
                    taken[id(p)] = group_name
                    members.append(p)
        out.append({"params": members, "lr": float(group.lr)})
    rest = [p for p in params if id(p) not in taken]
    return [{"params": rest}, *out] if rest else out
