"""The signatures of the hooks a phase kind declares (``meeple.phases.registry.Hook``).

A stage calls a hook only when its kind declares it; :func:`check_hooks` makes sure, once per
stage right after the build, that the module built has every hook its kind declares (a plugin
may name a module class of its own in ``phase.module``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from meeple.phases.registry import Hook, PhaseKind


class TakesTeacher(Protocol):
    def set_teacher(self, checkpoint: dict[str, Any], file: Path) -> None: ...


class WarmsUp(Protocol):
    def set_warmup(self, epochs: int, start_fraction: float) -> None: ...


class KeepsReference(Protocol):
    def wants_reference(self) -> bool: ...

    def set_reference_from_actor(self) -> None: ...


class UsesRunFolder(Protocol):
    def use_run_folder(self, folder: Path, stage_index: int) -> None: ...


PROTOCOLS: dict[Hook, type] = {Hook.TEACHER: TakesTeacher, Hook.WARMUP: WarmsUp, Hook.REFERENCE: KeepsReference,
                               Hook.RUN_FOLDER: UsesRunFolder}


def check_hooks(kind: PhaseKind, module: Any) -> None:
    """TypeError unless ``module`` has the methods of every hook ``kind`` declares."""
    for hook in sorted(kind.hooks):
        protocol = PROTOCOLS[hook]
        missing = [name for name in _methods(protocol) if not callable(getattr(module, name, None))]
        if missing:
            raise TypeError(f"phase={kind.name} declares the {hook} hook, but its module {type(module).__name__} "
                            f"has no {', '.join(missing)}; accepted: a module class with {protocol.__name__}'s "
                            "methods (e.g. one built on meeple.phases.ppo.module.PPOModule)")


def _methods(protocol: type) -> list[str]:
    return [name for name, value in vars(protocol).items() if callable(value) and not name.startswith("_")]
