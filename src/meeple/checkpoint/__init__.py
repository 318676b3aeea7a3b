"""Crash-safe checkpoints, run directories, gates, opponent pools and exact resume.

See docs/checkpoints.md. ``io`` (the atomic save/verify/load protocol and Lightning's
``CheckpointIO``), ``run_dir`` (layout), ``retention``, ``pool`` (league models),
``rng`` (generator states), ``callback`` (saving at rollout boundaries, gates, resume
selection) and ``session`` (the run directory, master seed and resume, set up from the run
plan's records: ``meeple.config.run``).
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
