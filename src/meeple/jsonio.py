"""Result files (JSON, pages) written atomically (a reader never sees half a file)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_text_atomic(path: Path | str, text: str) -> Path:
    """Writes ``text`` to a temp file beside ``path``, then renames it over ``path``: a reader
    never sees half a file, and a failed write leaves none behind."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; results are ordinary files
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_json_atomic(path: Path | str, payload: Any, indent: int = 2) -> None:
    """``payload`` as JSON, written atomically (:func:`write_text_atomic`)."""
    write_text_atomic(path, json.dumps(payload, indent=indent) + "\n")
