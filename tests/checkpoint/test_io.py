"""The save protocol, verification and safe loading of single checkpoint files."""

from __future__ import annotations

import io
import logging
import subprocess

import pytest
import torch

from meeple.checkpoint import io as ckpt_io
from meeple.checkpoint.io import (
    CHECKPOINT_VERSION,
    AtomicCheckpointIO,
    CheckpointError,
    ChecksumMismatch,
    clean_partial_writes,
    copy_verified,
    from_file_layout,
    load_verified,
    replace_symlink,
    save_atomic,
    sidecar_path,
    to_file_layout,
)


def _checkpoint(step: int = 3) -> dict:
    return {"model_state_dict": {"w": torch.arange(4.0) * step}, "global_step": step,
            "checkpoint_version": CHECKPOINT_VERSION}


def test_save_writes_file_and_gnu_sidecar_that_sha256sum_accepts(tmp_path):
    path = tmp_path / "ckpt_phase0_step00000003.pt"
    digest = save_atomic(_checkpoint(), path)
    assert sidecar_path(path).read_text() == f"{digest}  {path.name}\n"
    assert not list(tmp_path.glob("*.tmp"))
    done = subprocess.run(["sha256sum", "-c", sidecar_path(path).name], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0 and "OK" in done.stdout
    assert torch.equal(load_verified(path)["model_state_dict"]["w"], torch.arange(4.0) * 3)


def test_flipped_byte_is_refused_before_deserializing(tmp_path, flip_byte, monkeypatch):
    path = tmp_path / "a.pt"
    save_atomic(_checkpoint(), path)
    flip_byte(path)
    monkeypatch.setattr(ckpt_io, "deserialize", lambda *a, **k: pytest.fail("deserialized a corrupt file"))
    with pytest.raises(ChecksumMismatch, match="does not match a.pt.sha256"):
        load_verified(path)


def test_missing_sidecar_warns_and_loads(tmp_path, caplog):
    path = tmp_path / "a.pt"
    save_atomic(_checkpoint(), path)
    sidecar_path(path).unlink()
    with caplog.at_level(logging.WARNING):
        assert load_verified(path)["global_step"] == 3
    assert "no .sha256 sidecar" in caplog.text


def test_loading_never_runs_code(tmp_path):
    class Payload:
        def __reduce__(self):
            return (print, ("pwned",))

    path = tmp_path / "evil.pt"
    data = io.BytesIO()
    torch.save({"checkpoint_version": CHECKPOINT_VERSION, "x": Payload()}, data)
    ckpt_io.write_atomic(path, data.getvalue())  # a valid sidecar does not make it safe
    with pytest.raises(CheckpointError, match="cannot be deserialized safely") as err:
        load_verified(path)
    text = str(err.value)  # one line, without torch's advice to load it with weights_only=False
    assert "\n" not in text and "weights_only" not in text and "(print)" in text, text


@pytest.mark.parametrize("content", [b"hello\n", b"truncated"])
def test_a_file_that_does_not_load_gets_its_error_alone(tmp_path, caplog, content):
    """No 'no .sha256 sidecar: loading it unverified' warning before the error (issue 41)."""
    path = tmp_path / "not-a-checkpoint.pt"
    path.write_bytes(content)
    with caplog.at_level(logging.WARNING), pytest.raises(CheckpointError, match="cannot be deserialized safely") as err:
        load_verified(path)
    assert not caplog.records, caplog.text
    assert "not a checkpoint file" in str(err.value) and "accepted:" in str(err.value)


def test_versions_unknown_refused_older_migrated(tmp_path, monkeypatch):
    path = tmp_path / "new.pt"
    save_atomic({**_checkpoint(), "checkpoint_version": CHECKPOINT_VERSION + 1}, path)
    with pytest.raises(CheckpointError, match=f"checkpoint_version={CHECKPOINT_VERSION + 1} is unknown"):
        load_verified(path)

    old = tmp_path / "old.pt"
    save_atomic({"weights": {"w": torch.ones(2)}, "checkpoint_version": CHECKPOINT_VERSION - 1}, old)
    with pytest.raises(CheckpointError, match="no migration"):
        load_verified(old)

    def rename_weights(checkpoint):
        checkpoint["model_state_dict"] = checkpoint.pop("weights")
        return checkpoint

    monkeypatch.setitem(ckpt_io.MIGRATIONS, CHECKPOINT_VERSION - 1, rename_weights)
    migrated = load_verified(old)
    assert migrated["checkpoint_version"] == CHECKPOINT_VERSION and "model_state_dict" in migrated

    plain = tmp_path / "plain.pt"
    save_atomic({"w": torch.ones(1)}, plain)
    with pytest.raises(CheckpointError, match="not a meeple checkpoint"):
        load_verified(plain)


def test_lightning_layout_round_trip():
    lightning = {"state_dict": {"w": torch.ones(1)}, "optimizer_states": [{"state": {}}], "lr_schedulers": [],
                 "epoch": 2, "global_step": 8, "loops": {}}
    on_disk = to_file_layout(lightning)
    assert on_disk["model_state_dict"] is lightning["state_dict"]
    assert on_disk["optimizer_state_dict"] == {"state": {}} and on_disk["scheduler_state_dict"] is None
    assert on_disk["checkpoint_version"] == CHECKPOINT_VERSION and "timestamp" in on_disk
    assert not {"state_dict", "optimizer_states", "lr_schedulers"} & set(on_disk)
    back = from_file_layout(on_disk)
    assert back["state_dict"] is lightning["state_dict"]
    assert back["optimizer_states"] == [{"state": {}}] and back["lr_schedulers"] == []


def test_checkpoint_io_plugin_preloads_once(tmp_path, monkeypatch):
    path = tmp_path / "c.pt"
    plugin = AtomicCheckpointIO()
    plugin.save_checkpoint({"state_dict": {"w": torch.ones(1)}, "optimizer_states": [], "lr_schedulers": []}, path)
    plugin.preload(path)
    monkeypatch.setattr(ckpt_io, "read_verified", lambda *a: pytest.fail("read twice"))
    assert torch.equal(plugin.load_checkpoint(path)["state_dict"]["w"], torch.ones(1))


def test_partial_writes_are_cleaned_and_links_replaced_atomically(tmp_path):
    (tmp_path / "ckpt_phase0_step00000001.pt.tmp").write_bytes(b"half")
    save_atomic(_checkpoint(1), tmp_path / "ckpt_phase0_step00000001.pt")
    assert [p.name for p in clean_partial_writes(tmp_path)] == []  # the save replaced its own .tmp
    (tmp_path / "x.pt.tmp").write_bytes(b"half")
    assert [p.name for p in clean_partial_writes(tmp_path)] == ["x.pt.tmp"]

    replace_symlink(tmp_path / "latest.pt", "ckpt_phase0_step00000001.pt")
    save_atomic(_checkpoint(2), tmp_path / "ckpt_phase0_step00000002.pt")
    replace_symlink(tmp_path / "latest.pt", "ckpt_phase0_step00000002.pt")
    assert (tmp_path / "latest.pt").readlink().name == "ckpt_phase0_step00000002.pt"
    assert load_verified(tmp_path / "latest.pt")["global_step"] == 2


def test_copies_are_full_verified_files(tmp_path, flip_byte):
    src, dst = tmp_path / "a.pt", tmp_path / "gates" / "bc_best.pt"
    save_atomic(_checkpoint(), src)
    copy_verified(src, dst)
    assert not dst.is_symlink() and dst.read_bytes() == src.read_bytes()
    flip_byte(src)
    with pytest.raises(ChecksumMismatch):
        copy_verified(src, tmp_path / "gates" / "other.pt")


def test_resume_takes_a_durable_file_newer_than_latest(tmp_path):
    # A process that dies after a checkpoint is durable and before its queued link update (a DDP
    # rank 0 leaving by os._exit) leaves latest.pt one save behind: resume takes the newer file.
    from meeple.checkpoint.callback import select_resume_checkpoint

    for step in (16, 32, 48):
        save_atomic(_checkpoint(step), tmp_path / f"ckpt_phase0_step{step:08d}.pt")
    replace_symlink(tmp_path / "latest.pt", "ckpt_phase0_step00000032.pt")
    assert select_resume_checkpoint(tmp_path, 0, AtomicCheckpointIO()).name == "ckpt_phase0_step00000048.pt"
