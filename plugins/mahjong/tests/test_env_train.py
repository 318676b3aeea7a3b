"""``python train.py env=mahjong`` end to end, in a subprocess from an empty folder."""

import subprocess
import sys
from pathlib import Path

import mlflow

TRAIN = str(Path(__file__).resolve().parents[3] / "train.py")


def _train(cwd, *args):
    return subprocess.run(
        [sys.executable, TRAIN, *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )


def test_env_mahjong_debug_tiny_trains_with_masked_batched_decisions(tmp_path):
    done = _train(
        tmp_path, "env=mahjong", "debug=tiny", "seed=4", "env.num_envs=4", "env.learner_seats=[0,2]"
    )
    assert done.returncode == 0, done.stderr[-3000:]
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/outputs/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name("default").experiment_id])
    assert run.info.status == "FINISHED" and run.data.tags["env"] == "mahjong"
    for key in ("loss/objective", "loss/critic", "eval/episode_return", "perf/frames_per_s"):
        assert key in run.data.metrics, sorted(run.data.metrics)


def test_mahjong_ppo_recipe_debug_tiny(tmp_path):
    done = _train(tmp_path, "+experiment=mahjong_ppo", "debug=tiny", "tracking=none")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "final greedy evaluation" in done.stdout + done.stderr


def test_bad_env_option_is_one_clear_line(tmp_path):
    done = _train(tmp_path, "env=mahjong", "debug=tiny", "tracking=none", "env.opponents=smart")
    assert done.returncode != 0
    assert "env.opponents: unknown bot 'smart'; accepted: random, rule, rule-nofold" in done.stderr
    assert "Traceback" not in done.stderr
