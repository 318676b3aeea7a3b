"""Run directories: naming, layout, run.json, finding the run to resume."""

from __future__ import annotations

from datetime import UTC, datetime

from meeple.checkpoint.run_dir import RunDirectory, find_latest_run, make_run_id


def test_run_id_and_layout(tmp_path):
    assert make_run_id(0xBEEF, datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)) == "20250304_050607_0000beef"
    run = RunDirectory.create(tmp_path / "runs", master_seed=7, experiment="phase3", task="train")
    assert run.path.name.endswith("_00000007") and run.run_id == run.path.name
    (run.checkpoint_dir(1)).mkdir(parents=True)
    (run.checkpoint_dir(1) / "ckpt_phase1_step00000001.pt.tmp").write_bytes(b"x")
    run.prepare(1)
    assert run.checkpoint_dir(1) == run.path / "phase1" / "checkpoints"
    assert (run.path / "gates").is_dir() and (run.path / "eval").is_dir()
    assert not list(run.checkpoint_dir(1).iterdir())
    assert run.opponent_pool_dir() == run.path / "phase3" / "opponent_pool"
    assert not run.opponent_pool_dir().exists()  # created only when a phase uses a pool

    run.mlflow_run_id = "abc"
    run.save()
    reopened = RunDirectory.open(run.path)
    assert reopened == run


def test_latest_run_of_the_same_experiment_and_task(tmp_path):
    root = tmp_path / "runs"
    old = RunDirectory.create(root, master_seed=1, experiment="a", task="train")
    new = RunDirectory.create(root, master_seed=1, experiment="a", task="train")  # same second: suffixed
    RunDirectory.create(root, master_seed=2, experiment="b", task="train")
    RunDirectory.create(root, master_seed=3, experiment="a", task="debug")
    assert new.path != old.path
    assert find_latest_run(root, experiment="a", task="train").path == new.path
    assert find_latest_run(root, experiment="c", task="train") is None
