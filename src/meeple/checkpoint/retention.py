"""Checkpoint discovery and retention: at most ``keep`` per phase, oldest first out.

Never evicted: the target of ``best.pt``, the target of ``latest.pt``, and any checkpoint whose
bytes were copied to ``gates/`` (matched by SHA-256, so a gate needs no bookkeeping of where it
came from). Partial writes (``*.tmp``), sidecars and links are not checkpoints.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from meeple.checkpoint.io import ChecksumMismatch, read_sidecar, remove_checkpoint_file, sha256_hex

log = logging.getLogger(__name__)

LATEST = "latest.pt"
BEST = "best.pt"
_NAME = re.compile(r"^ckpt_phase(\d+)_step(\d{8,})\.pt$")


def checkpoint_name(phase: int, global_step: int) -> str:
    return f"ckpt_phase{phase}_step{global_step:08d}.pt"


def checkpoint_step(path: Path) -> int | None:
    match = _NAME.match(path.name)
    return int(match.group(2)) if match else None


def list_checkpoints(folder: Path, phase: int) -> list[Path]:
    """Complete checkpoint files of ``phase`` in ``folder``, oldest (lowest step) first."""
    found = []
    for path in Path(folder).glob(f"ckpt_phase{phase}_step*.pt"):
        match = _NAME.match(path.name)
        if match and int(match.group(1)) == phase and path.is_file() and not path.is_symlink():
            found.append((int(match.group(2)), path))
    return [path for _, path in sorted(found)]


def link_target(link: Path) -> Path | None:
    """The file a ``latest.pt``/``best.pt`` link points at, when both exist."""
    if not link.is_symlink():
        return None
    target = link.resolve()
    return target if target.is_file() else None


def file_digest(path: Path) -> str | None:
    """SHA-256 from the sidecar, else computed from the bytes (None if unreadable)."""
    try:
        return read_sidecar(path) or sha256_hex(path.read_bytes())
    except (ChecksumMismatch, OSError):
        return None


def gate_digests(gates_dir: Path | None) -> set[str]:
    if gates_dir is None or not Path(gates_dir).is_dir():
        return set()
    return {d for gate in Path(gates_dir).glob("*.pt") if (d := file_digest(gate))}


def protected(folder: Path, phase: int, gates_dir: Path | None = None) -> set[Path]:
    """Checkpoints of ``phase`` that retention must keep."""
    keep = {t for link in (folder / BEST, folder / LATEST) if (t := link_target(link))}
    gated = gate_digests(gates_dir)
    if gated:
        keep |= {p.resolve() for p in list_checkpoints(folder, phase) if file_digest(p) in gated}
    return keep


def prune(folder: Path, phase: int, keep: int, gates_dir: Path | None = None) -> list[Path]:
    """Remove the oldest unprotected checkpoints until at most ``keep`` remain; return them."""
    if keep < 1:
        raise ValueError(f"checkpoint.keep={keep}; accepted: an integer >= 1")
    checkpoints = list_checkpoints(folder, phase)
    excess = len(checkpoints) - keep
    if excess <= 0:
        return []
    safe = protected(folder, phase, gates_dir)
    removed = []
    for path in checkpoints:
        if excess <= 0:
            break
        if path.resolve() in safe:
            continue
        remove_checkpoint_file(path)
        removed.append(path)
        excess -= 1
    if removed:
        log.debug("retention removed %s", ", ".join(p.name for p in removed))
    return removed
