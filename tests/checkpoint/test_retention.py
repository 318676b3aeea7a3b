"""Retention: at most `keep` per phase, oldest out; best.pt's target and gate copies stay."""

from __future__ import annotations

import torch

from meeple.checkpoint.io import (
    CHECKPOINT_VERSION,
    copy_verified,
    replace_symlink,
    save_atomic,
    sidecar_path,
)
from meeple.checkpoint.retention import BEST, LATEST, checkpoint_name, list_checkpoints, prune


def _write(folder, phase, step):
    path = folder / checkpoint_name(phase, step)
    save_atomic({"model_state_dict": {"w": torch.full((2,), float(step))}, "checkpoint_version": CHECKPOINT_VERSION}, path)
    return path


def test_fifo_keeps_best_target_and_gated_checkpoints(tmp_path):
    folder, gates = tmp_path / "phase1" / "checkpoints", tmp_path / "gates"
    paths = [_write(folder, 1, step) for step in (10, 20, 30, 40, 50, 60)]
    _write(folder, 2, 5)  # another phase's file is not counted or touched
    (folder / "ckpt_phase1_step00000070.pt.tmp").write_bytes(b"partial")  # not a checkpoint
    replace_symlink(folder / BEST, paths[1].name)  # step 20
    copy_verified(paths[0], gates / "bc_best.pt")  # step 10's bytes went to a gate
    replace_symlink(folder / LATEST, paths[-1].name)

    removed = prune(folder, 1, keep=3, gates_dir=gates)

    assert [p.name for p in removed] == [paths[2].name, paths[3].name, paths[4].name]  # 30, 40, 50
    kept = [p.name for p in list_checkpoints(folder, 1)]
    assert kept == [paths[0].name, paths[1].name, paths[5].name]
    assert all(not sidecar_path(p).exists() for p in removed)
    assert (folder / BEST).resolve() == paths[1] and (folder / LATEST).resolve() == paths[5]
    assert (gates / "bc_best.pt").is_file() and list_checkpoints(folder, 2)

    assert prune(folder, 1, keep=3, gates_dir=gates) == []  # already at the limit


def test_protected_files_may_exceed_keep(tmp_path):
    folder = tmp_path / "c"
    paths = [_write(folder, 0, step) for step in (1, 2)]
    replace_symlink(folder / BEST, paths[0].name)
    replace_symlink(folder / LATEST, paths[1].name)
    assert prune(folder, 0, keep=1) == []
    assert len(list_checkpoints(folder, 0)) == 2
