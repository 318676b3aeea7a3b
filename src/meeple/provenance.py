"""Which code a run or a benchmark measured: the git commit of meeple's checkout and what was
uncommitted in it (MLflow tags and benchmark result files both record it)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import meeple


def git_state(cwd: Path | None = None) -> dict[str, Any]:
    """``{"sha": HEAD or "unknown", "uncommitted": git status --porcelain lines}`` of the
    repository holding meeple (``cwd``: another folder in it); outside git: unknown, none."""
    cwd = cwd or Path(meeple.__file__).resolve().parent

    def git(*args: str) -> str | None:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=5)
        return out.stdout if out.returncode == 0 else None

    try:
        sha = git("rev-parse", "HEAD")
        if sha is None:
            return {"sha": "unknown", "uncommitted": []}
        return {"sha": sha.strip() or "unknown", "uncommitted": (git("status", "--porcelain") or "").splitlines()}
    except (OSError, subprocess.SubprocessError):
        return {"sha": "unknown", "uncommitted": []}
