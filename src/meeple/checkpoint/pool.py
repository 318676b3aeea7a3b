"""Opponent pool models for league self-play: weights only, one JSON sidecar each.

``pool_v{version:04d}_step{step:08d}.pt`` holds ``{"model_state_dict", "checkpoint_version"}``,
written with the checkpoint save protocol (``.sha256`` sidecar); ``<same name>.meta.json``
holds the version, source step, phase, rating mu/sigma, games, win rate and UTC promotion time.
Versions come from a counter file (``VERSION``) that is bumped, durably, before the model is
written: numbers only grow, across restarts, even when models are deleted or a write dies.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch

from meeple.checkpoint.io import (
    CHECKPOINT_VERSION,
    CheckpointError,
    clean_partial_writes,
    load_verified,
    remove_checkpoint_file,
    save_atomic,
    write_text_atomic,
)

COUNTER_FILE = "VERSION"
META_SUFFIX = ".meta.json"
_NAME = re.compile(r"^pool_v(\d{4,})_step(\d{8,})\.pt$")
_UPDATABLE = ("rating_mu", "rating_sigma", "games", "win_rate")


@dataclass
class PoolEntry:
    version: int
    step: int
    phase: int
    rating_mu: float | None = None
    rating_sigma: float | None = None
    games: int = 0
    win_rate: float | None = None
    promoted_utc: str = ""
    file: str = ""


def pool_name(version: int, step: int) -> str:
    return f"pool_v{version:04d}_step{step:08d}.pt"


class OpponentPool:
    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        clean_partial_writes(self.folder)

    # -- versions --------------------------------------------------------------------------
    def _counter(self) -> int:
        try:
            return int((self.folder / COUNTER_FILE).read_text().strip())
        except (FileNotFoundError, ValueError):
            return 0

    def _file_versions(self) -> list[int]:
        return [int(m.group(1)) for p in self.folder.glob("pool_v*.pt") if (m := _NAME.match(p.name))]

    def last_version(self) -> int:
        """The highest version ever issued here (0 when none)."""
        return max([self._counter(), *self._file_versions()])

    def _issue_version(self) -> int:
        version = self.last_version() + 1
        write_text_atomic(self.folder / COUNTER_FILE, f"{version}\n")
        return version

    # -- models ----------------------------------------------------------------------------
    def add(self, model_state_dict: dict[str, torch.Tensor], *, step: int, phase: int,
            rating_mu: float | None = None, rating_sigma: float | None = None, games: int = 0,
            win_rate: float | None = None) -> PoolEntry:
        """Promote weights into the pool under the next version; returns its metadata."""
        version = self._issue_version()
        name = pool_name(version, step)
        entry = PoolEntry(version=version, step=step, phase=phase, rating_mu=rating_mu, rating_sigma=rating_sigma,
                          games=games, win_rate=win_rate, promoted_utc=datetime.now(UTC).isoformat(), file=name)
        state = {key: value.detach().cpu() for key, value in model_state_dict.items()}
        save_atomic({"model_state_dict": state, "checkpoint_version": CHECKPOINT_VERSION}, self.folder / name)
        self._write_meta(entry)
        return entry

    def _write_meta(self, entry: PoolEntry) -> None:
        write_text_atomic(self.folder / (entry.file + META_SUFFIX), json.dumps(asdict(entry), indent=2) + "\n")

    def entries(self) -> list[PoolEntry]:
        """Every complete pool model (file and sidecar present), by version."""
        found = []
        for path in self.folder.glob("pool_v*.pt"):
            meta = self.folder / (path.name + META_SUFFIX)
            if _NAME.match(path.name) and meta.is_file():
                found.append(PoolEntry(**json.loads(meta.read_text())))
        return sorted(found, key=lambda e: e.version)

    def entry(self, version: int) -> PoolEntry:
        for entry in self.entries():
            if entry.version == version:
                return entry
        raise CheckpointError(f"opponent pool {self.folder} has no model v{version:04d}")

    def load(self, version: int, *, map_location: Any = None) -> dict[str, torch.Tensor]:
        """The weights of ``version``, verified; corruption is an error (no fallback)."""
        return load_verified(self.folder / self.entry(version).file, map_location=map_location)["model_state_dict"]

    def update(self, version: int, **fields: Any) -> PoolEntry:
        """Rewrite the metadata (ratings, games, win rate) of ``version``."""
        entry = self.entry(version)
        for key, value in fields.items():
            if key not in _UPDATABLE:
                raise ValueError(f"pool metadata field {key!r}; accepted: {', '.join(_UPDATABLE)}")
            setattr(entry, key, value)
        self._write_meta(entry)
        return entry

    def remove(self, version: int) -> None:
        entry = self.entry(version)
        (self.folder / (entry.file + META_SUFFIX)).unlink(missing_ok=True)
        remove_checkpoint_file(self.folder / entry.file)
