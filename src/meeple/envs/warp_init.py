"""``wp.init()`` without start-up noise: a log should show our lines, not Warp's banner.

Warp 1.19 prints a greeting and a per-module load time at INFO level (its old
``config.quiet`` flag no longer exists), and its native library writes "Warp CUDA warning:
Could not find or load the NVIDIA CUDA driver" to stderr on every machine without CUDA, where
running on the CPU is the expected case.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

import torch
import warp as wp

# Before any kernel module is defined or loaded: warnings and errors only.
wp.config.log_level = max(wp.config.log_level, wp.LOG_WARNING)


@contextlib.contextmanager
def _stderr_silenced() -> Iterator[None]:
    """Point file descriptor 2 at /dev/null (C code writes there directly, past sys.stderr)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def init_warp() -> None:
    """Initialise Warp (idempotent). On a machine where torch sees no CUDA the driver warning
    is dropped; a failed initialisation still raises."""
    if torch.cuda.is_available():
        wp.init()
        return
    with _stderr_silenced():
        wp.init()
