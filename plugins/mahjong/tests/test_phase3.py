"""`python train.py +experiment=phase3 debug=tiny`: the league starts from the newest phase-2
run's student, seats its latest copy, snapshots and the phase-2 anchor, rates finished games and
keeps its pool in the checkpoint (conftest.mahjong_runs runs both experiments)."""

import json

import pytest
import torch

from meeple.checkpoint.callback import load_gate
from meeple.checkpoint.io import load_verified
from meeple.checkpoint.pool import OpponentPool


@pytest.fixture(scope="module")
def league(mahjong_runs):
    run = mahjong_runs["phase3"]
    return run, load_verified(run / "phase3" / "checkpoints" / "latest.pt")


def test_league_starts_from_the_newest_phase2_student(mahjong_runs, league):
    run, _ = league
    record = json.loads((run / "phase2" / "done.json").read_text())
    assert (run.parents[2] / record["imported_from"]).resolve() == mahjong_runs["phase2"].resolve()
    student = load_gate(run / "gates" / "student.pt")["model_state_dict"]
    pool = OpponentPool(run / "phase3" / "opponent_pool")
    anchor = pool.load(pool.entries()[0].version)  # the first network in: the anchor
    for key, value in anchor.items():
        assert torch.equal(value, student[f"actor.{key}"]), key


def test_league_rates_games_promotes_and_logs_who_sat_where(league):
    _, latest = league
    m = latest["metrics"]
    assert m["league/games"] >= 1 and 1.0 <= m["league/learner_avg_rank"] <= 4.0
    assert m["league/learner_sigma"] < 25 / 3  # rated: uncertainty went down from openskill's start
    assert m["league/learner_conservative"] == pytest.approx(m["league/learner_mu"] - 3 * m["league/learner_sigma"])
    assert m["league/promotions"] == 2 and m["league/pool_size"] == 2  # every 2 of 5 rollouts
    seats = [m[f"league/seats_{k}"] for k in ("latest", "pool", "anchor")]
    assert sum(seats) == pytest.approx(1.0) and m["league/seats_latest"] > 0
    assert m["train/entropy_coef"] < 0.01  # decaying toward schedule.entropy_final
    for key in ("eval/vs_start_avg_rank", "eval/vs_start_p_value", "eval/avg_rank"):
        assert key in m, key


def test_the_pool_and_ratings_are_in_the_checkpoint(league):
    run, latest = league
    state = latest["league"]
    names = [e["name"] for e in state["pool"]["entries"]]
    assert names[0] == "anchor" and names[1:] == ["v0002", "v0003"]
    ratings = state["pool"]["ratings"]
    assert {"learner", "anchor", "v0002", "v0003"} <= set(ratings["ratings"])
    files = sorted(p.name for p in (run / "phase3" / "opponent_pool").glob("pool_v*.pt"))
    assert len(files) == 3
    best = load_verified(run / "phase3" / "checkpoints" / "best.pt")
    assert best["metrics"]["league/learner_conservative"] >= latest["metrics"]["league/learner_conservative"]


def test_the_league_policy_exports_to_onnx_with_parity(league, tmp_path):
    """python -m meeple.export on the league run records observations by seating the policy in
    every seat of the league env, and checks onnxruntime against eager torch on them."""
    import subprocess
    import sys

    run, _ = league
    out = tmp_path / "league.onnx"
    done = subprocess.run([sys.executable, "-m", "meeple.export", str(run), "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert out.is_file() and "masked argmax agrees: True" in done.stdout


@pytest.mark.parametrize("overrides, error", [
    (["collector=ray", "env.num_workers=2"], None),
    (["env.num_workers=2"], r"stage 'league': phase=league collects in this process .*env\.num_workers=2; "
                            r"accepted: env\.num_workers=1 with collector=sync or auto, or collector=ray"),
    (["collector=multisync"], r"collector=multisync is not one phase=league collects with; accepted: "
                              r"collector=auto, collector=sync, collector=ray"),
])
def test_league_collectors(overrides, error):
    from meeple.config.compose import compose_config
    from meeple.errors import ConfigError
    from meeple.pipeline.plan import plan_run

    cfg = compose_config(["+experiment=phase3", *overrides])
    if error is None:
        assert [s.name for s in plan_run(cfg).stages][-1] == "league"
    else:
        with pytest.raises(ConfigError, match=error):
            plan_run(cfg)
