"""Learning checks: sync and async packed PPO learn GoalGrid on CPU (greedy success >= 0.8)."""

import pytest

from meeple.cli.train import train

pytest.importorskip("warp")


@pytest.mark.slow
@pytest.mark.parametrize("experiment", ["pixels_ppo", "pixels_async_ppo"])
def test_pixels_experiment_learns_goal_grid(compose, in_tmp, experiment):
    # The recipe's budget and hyperparameters; the run stops once greedy success reaches 0.8.
    overrides = [
        f"+experiment={experiment}",
        "seed=1",
        "callbacks.progress=null",
        "phase.stop.success_rate=0.8",
        "phase.eval.every_n_rollouts=5",
    ]
    metrics = train(compose(overrides))
    assert metrics["eval/success_rate"] >= 0.8
    assert metrics["train/frames"] <= 400_000
    if experiment == "pixels_async_ppo":
        assert metrics["perf/policy_lag"] == 1.0
    # The success curve in MLflow is checked per process in tests/smoke/test_cli_pixels.py
    # (MLflow keeps one store per URI per process, so a second run here logs to the first db).
