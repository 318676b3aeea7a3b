"""python -m meeple_mahjong.policy_drift: a run's checkpoints read on the decisions its start
meets against rule bots, per kind of decision; bad arguments fail in one line."""

import json

from meeple_mahjong import policy_drift as pd


def test_the_command_reads_a_runs_checkpoints_on_fixed_decisions(mahjong_runs, tmp_path, capsys):
    run = mahjong_runs["phase2"]  # phase 1 -> teacher -> student: the student's checkpoints moved from the clone
    start = run / "gates" / "phase1.pt"
    folder = run / "phase2" / "checkpoints"
    out = tmp_path / "drift.json"
    assert pd.main([str(start), str(folder), "--start", str(start), "--states", "128", "--seed", "3",
                    "--out", str(out)]) == 0  # fmt: skip
    s = json.loads(out.read_text())
    files = pd.checkpoint_files([start, folder], 1)
    assert s["checkpoints"] == [str(f) for f in files] and len(files) >= 3
    assert s["lags"] == pd.default_lags(len(files))
    every = s["groups"]["all"]
    assert every["decisions"] == 128
    assert every["to_start"][0] == 0.0  # the start read against itself
    assert every["to_start"][-1] > 0.0  # distillation moved the student
    assert len(every["lag_kl"]) == len(every["lag_corr"]) == len(every["walk_corr"]) == len(s["lags"])
    assert sum(s["groups"][name]["decisions"] for name in pd.GROUPS if name in s["groups"]) == 128
    assert "KL to start along the run" in capsys.readouterr().out


def test_bad_arguments_fail_in_one_line(mahjong_runs, tmp_path, capsys):
    start = mahjong_runs["phase2"] / "gates" / "phase1.pt"
    assert pd.main([str(start), "--start", str(start)]) == 2
    assert "accepted: two or more" in capsys.readouterr().err
    assert pd.main([str(tmp_path), str(start), "--start", str(start)]) == 2
    assert "no ckpt_phase<N>_step<S>.pt files" in capsys.readouterr().err


def test_every_nth_checkpoint_keeps_the_last(tmp_path):
    files = [tmp_path / f"ckpt_phase1_step{s:08d}.pt" for s in (30, 10, 20, 40, 50)]
    for f in files:
        f.touch()
    picked = pd.checkpoint_files([tmp_path], 2)
    assert [f.name for f in picked] == [f"ckpt_phase1_step{s:08d}.pt" for s in (10, 30, 50)]
    assert [f.name for f in pd.checkpoint_files([tmp_path], 3)][-1] == "ckpt_phase1_step00000050.pt"
    assert pd.default_lags(9) == [1, 2, 4, 8]

