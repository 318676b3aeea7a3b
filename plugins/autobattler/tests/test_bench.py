"""``python -m meeple.bench autobattler``: a throughput row and the training column's run (the
smallest budget, one rollout), each against the real Node server."""

import math

import pytest

from meeple_autobattler import bench


def test_a_throughput_row_plays_games_over_shared_memory():
    row = bench.run_row("shm 1 env", "shm", 1, False, seconds=1.0)
    assert row.error is None and row.env_steps_per_s > 0 and row.cpu_percent > 0 and row.rss_mb > 0


def test_the_training_column_trains_on_the_rows_transport_and_evaluates_in_one_seat():
    result = bench.train_row("socket 1 env", "socket", 1, False, decisions=bench.ROLLOUT_DECISIONS, eval_games=4)
    assert result.decisions == bench.ROLLOUT_DECISIONS and result.games == 4 and result.wall_s > 0
    assert 1.0 <= result.mean_place <= 8.0 and result.ci95[0] <= result.mean_place <= result.ci95[1]
    assert not any(math.isnan(x) for x in result.ci95)


def test_a_budget_below_one_rollout_is_refused(capsys):
    with pytest.raises(SystemExit) as stop:
        bench.main(["--train-decisions", "100"])
    assert stop.value.code == 2 and "accepted: 0 (off) or >= 8192" in capsys.readouterr().err


def test_an_unknown_row_name_lists_the_rows(capsys):
    with pytest.raises(SystemExit) as stop:
        bench.main(["--rows", "shm 1 env,carrier pigeon"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "unknown ['carrier pigeon']" in err and "http 1 env, socket 1 env" in err
