"""The packed-frame recipes through the real CLI (debug=tiny), tracked in MLflow."""

import mlflow
import pytest

from tests.smoke.test_cli import train

pytest.importorskip("warp")


@pytest.mark.parametrize("experiment", ["pixels_ppo", "pixels_async_ppo"])
def test_pixels_debug_tiny_logs_success_curve_and_memory(tmp_path, experiment):
    done = train(tmp_path, f"+experiment={experiment}", "debug=tiny", "seed=3", timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "rollout observation memory: packed" in done.stderr + done.stdout
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/outputs/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    assert run.info.status == "FINISHED"
    metrics = run.data.metrics
    for key in (
        "eval/success_rate",
        "eval/episode_return",
        "perf/policy_lag",
        "loss/total",
        "memory/rollout_obs_bytes_packed",
        "memory/rollout_obs_bytes_unpacked_float32",
    ):
        assert key in metrics, sorted(metrics)
    assert (
        metrics["memory/rollout_obs_bytes_unpacked_float32"]
        == 16 * metrics["memory/rollout_obs_bytes_packed"]
    )
    history = client.get_metric_history(run.info.run_id, "eval/success_rate")
    assert len(history) >= 2  # a curve, not one point
