"""Learning checks: sync and async packed PPO learn GoalGrid on CPU (greedy success >= 0.8)."""

import pytest

from meeple.cli.train import train

pytest.importorskip("warp")


@pytest.mark.slow
@pytest.mark.parametrize("experiment", ["pixels_ppo", "pixels_async_ppo"])
def test_pixels_experiment_learns_goal_grid(compose, in_tmp, experiment):
    metrics = train(compose([f"+experiment={experiment}", "seed=1", "callbacks.progress=null"]))
    assert metrics["eval/success_rate"] >= 0.8
    assert metrics["train/frames"] <= 400_000
    if experiment == "pixels_async_ppo":
        assert metrics["perf/policy_lag"] == 1.0
    assert (in_tmp / "outputs" / "mlflow.db").exists()  # success curve logged to MLflow
