"""Crash-safe checkpoints, run directories, gates, opponent pools and exact resume.

See docs/checkpoints.md. ``io`` (the atomic save/verify/load protocol and Lightning's
``CheckpointIO``), ``run_dir`` (layout), ``retention``, ``pool`` (league models),
``rng`` (generator states), ``callback`` (saving at rollout boundaries, gates, resume
selection) and ``session`` (what ``train.py`` sets up from the config).
"""

from meeple.checkpoint.io import (
    CHECKPOINT_VERSION,
    AtomicCheckpointIO,
    CheckpointError,
    ChecksumMismatch,
    load_verified,
    save_atomic,
)

__all__ = [
    "CHECKPOINT_VERSION",
    "AtomicCheckpointIO",
    "CheckpointError",
    "ChecksumMismatch",
    "load_verified",
    "save_atomic",
]
