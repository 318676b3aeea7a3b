"""Learning checks: the default run solves CartPole; same seed + config => same numbers."""

import pytest

from meeple.cli.train import train
from meeple.tracking.keys import EVAL_RETURN


@pytest.mark.slow
def test_default_run_solves_cartpole(compose, in_tmp):
    metrics = train(compose(["seed=1", "tracking=none", "callbacks.progress=null"]))
    assert metrics[EVAL_RETURN] >= 475.0
    assert metrics["train/frames"] <= 500_000


@pytest.mark.slow
def test_same_seed_same_config_same_metrics(compose, in_tmp):
    overrides = ["seed=11", "tracking=none", "callbacks.progress=null", "phase.total_frames=3072",
                 "phase.eval.every_n_rollouts=1", "phase.eval.episodes=4"]
    def learning(metrics):  # perf/* are wall-clock rates and differ run to run
        return {k: v for k, v in metrics.items() if not k.startswith("perf/")}

    first = learning(train(compose(overrides)))
    second = learning(train(compose(overrides)))
    assert first == second
    assert "loss/total" in first and EVAL_RETURN in first
    other = learning(train(compose(["seed=12"] + overrides[1:])))
    assert other != first
