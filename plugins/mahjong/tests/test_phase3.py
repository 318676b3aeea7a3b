"""`python train.py +experiment=phase3 debug=tiny`: the league starts from the newest phase-2
run's student, seats its latest copy, snapshots and two anchors (the student and phase 1's gate,
``phase.league.anchors``), rates finished games and keeps its pool in the checkpoint
(conftest.mahjong_runs runs both experiments)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from meeple.checkpoint.callback import load_gate
from meeple.checkpoint.io import load_verified, save_atomic
from meeple.checkpoint.pool import OpponentPool

TRAIN = str(Path(__file__).resolve().parents[3] / "train.py")


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


def test_an_earlier_gate_joins_as_a_named_anchor(mahjong_runs, league):
    run, latest = league
    phase1 = load_gate(mahjong_runs["phase2"] / "gates" / "phase1.pt")["model_state_dict"]
    pool = OpponentPool(run / "phase3" / "opponent_pool")
    anchor = pool.load(pool.entries()[1].version)
    assert anchor.keys() == {k[len("actor."):] for k in phase1 if k.startswith("actor.")}
    for key, value in anchor.items():
        assert torch.equal(value, phase1[f"actor.{key}"]), key
    mu, sigma = latest["league"]["pool"]["ratings"]["ratings"]["phase1"]
    assert latest["metrics"]["league/anchor_phase1_conservative"] == pytest.approx(mu - 3 * sigma)


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
    assert names == ["anchor", "phase1", "v0003", "v0004"]
    ratings = state["pool"]["ratings"]
    assert {"learner", "anchor", "phase1", "v0003", "v0004"} <= set(ratings["ratings"])
    files = sorted(p.name for p in (run / "phase3" / "opponent_pool").glob("pool_v*.pt"))
    assert len(files) == 4
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


def test_a_league_killed_after_a_checkpoint_resumes_and_finishes(mahjong_runs, tiny_train, tmp_path):
    """The league run as a kill after rollout 3 leaves it (no done.json, newer checkpoints gone):
    ``resume=true`` restores the learner, its pool and ratings, and plays rollouts 4 and 5. The
    learner's frozen ``latest`` copy is not in the checkpoints: it is the actor at every rollout
    boundary, built again after the restore."""
    import shutil

    run = tmp_path / "outputs" / "runs" / mahjong_runs["phase3"].name
    shutil.copytree(mahjong_runs["phase3"], run, symlinks=True)
    (run / "phase3" / "done.json").unlink()
    checkpoints = run / "phase3" / "checkpoints"
    steps = sorted(checkpoints.glob("ckpt_phase3_step*.pt"))
    assert len(steps) == 5
    for later in steps[3:]:
        later.unlink()
        later.with_name(later.name + ".sha256").unlink()
    (checkpoints / "latest.pt").unlink()
    (checkpoints / "latest.pt").symlink_to(steps[2].name)
    saved = load_verified(steps[2])
    assert saved["epoch"] == 2 and not any(k.startswith("latest.") for k in saved["model_state_dict"])
    # a checkpoint written before that rule holds the copy: the resume drops it
    legacy = dict(saved, model_state_dict={**saved["model_state_dict"], **{
        f"latest.{k[len('actor.'):]}": v for k, v in saved["model_state_dict"].items() if k.startswith("actor.")}})
    save_atomic(legacy, steps[2])

    phase1 = mahjong_runs["phase2"] / "gates" / "phase1.pt"
    tiny_train(tmp_path, "+experiment=phase3", f"+pipeline.stages.league.phase.league.anchors.phase1={phase1}",
               "resume=true", f"resume_dir={run}")
    assert (run / "phase3" / "done.json").is_file()
    final = load_verified(checkpoints / "latest.pt")
    assert final["epoch"] == 4 and final["global_step"] > saved["global_step"]
    assert final["league"]["promotions"] == 2 and final["league"]["games"] >= saved["league"]["games"]
    # v0004 was promoted after rollout 3's checkpoint: the resumed run's promotion is a new version
    assert [e["name"] for e in final["league"]["pool"]["entries"]] == ["anchor", "phase1", "v0003", "v0005"]
    before, after = saved["model_state_dict"], final["model_state_dict"]
    assert after.keys() == before.keys()  # no frozen copy written again
    assert any(not torch.equal(after[k], before[k]) for k in after if k.startswith("actor."))  # it trained on


@pytest.mark.parametrize("anchors, error", [
    ({"anchor": "gates/phase1.pt"}, r"phase\.league\.anchors\.anchor='anchor' .*accepted: a name .* other than anchor, "
                                    r"latest, learner"),
    ({"v0007": "gates/phase1.pt"}, r"phase\.league\.anchors\.v0007='v0007'"),
    ({"phase1": "gates/nowhere.pt"}, r"phase\.league\.anchors\.phase1='.*nowhere\.pt'.*accepted: an existing "
                                     r"checkpoint file \(\.pt\) or run directory"),
])
def test_bad_league_anchors_are_refused_before_training(mahjong_runs, anchors, error):
    from meeple.config.compose import compose_config
    from meeple.errors import ConfigError
    from meeple.pipeline.plan import plan_run

    run = mahjong_runs["phase2"]
    named = [f"+pipeline.stages.league.phase.league.anchors.{k}={run / v}" for k, v in anchors.items()]
    with pytest.raises(ConfigError, match=error):
        plan_run(compose_config(["+experiment=phase3", *named]))


def test_a_pool_without_room_beside_its_anchors_is_refused(mahjong_runs):
    from meeple.config.compose import compose_config
    from meeple.errors import ConfigError
    from meeple.pipeline.plan import plan_run

    phase1 = mahjong_runs["phase2"] / "gates" / "phase1.pt"
    with pytest.raises(ConfigError, match=r"phase\.league\.max_on_disk=2.*accepted: an integer >= 3 \(the start's "
                                          r"anchor, 1 of phase\.league\.anchors and a snapshot\)"):
        plan_run(compose_config(["+experiment=phase3", "pipeline.stages.league.phase.league.max_on_disk=2",
                                 f"+pipeline.stages.league.phase.league.anchors.phase1={phase1}"]))


def test_an_anchor_that_does_not_fit_the_learner_is_one_line(mahjong_runs, tmp_path):
    """The teacher reads the oracle planes: its weights do not fit the student's network; a torn
    file is refused by the checksum. Both name the key before any game is played."""
    from meeple.errors import ConfigError
    from meeple.phases.league.module import anchor_weights
    from meeple_mahjong.policy import load_policy_actor

    run = mahjong_runs["phase2"]
    student, _ = load_policy_actor(run / "gates" / "student.pt")
    assert anchor_weights(student, "phase1", str(run / "gates" / "phase1.pt")).keys() == student.state_dict().keys()
    with pytest.raises(ConfigError, match=r"^phase\.league\.anchors\.teacher=.*teacher\.pt: its weights do not fit "
                                          r"the learner's network \(.*\); accepted: a checkpoint of the same model$"):
        anchor_weights(student, "teacher", str(run / "gates" / "teacher.pt"))
    torn = tmp_path / "torn.pt"
    torn.write_bytes((run / "gates" / "phase1.pt").read_bytes()[:5000])
    with pytest.raises(ConfigError, match=r"^phase\.league\.anchors\.p1=.*torn\.pt: .*; accepted: a checkpoint of "
                                          r"the learner's network$"):
        anchor_weights(student, "p1", str(torn))


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


def test_the_readiness_gate_keeps_an_unready_student_from_the_league(mahjong_runs, tmp_path):
    """transition=from_student_ready checks the design's five readiness conditions on the
    student's in-run evaluation against copies of phase 1; a tiny student fails, and the league
    does not start (the recipe's full sizes: the gate stops it before anything is built): one line
    names each failed condition, the record lists all five."""
    from meeple.pipeline.transition import gate_checks
    from meeple_mahjong.readiness import readiness_gates

    phase2 = mahjong_runs["phase2"]
    metrics = load_gate(phase2 / "gates" / "student.pt")["metrics"]
    expected = gate_checks(readiness_gates(), metrics)  # the student recorded every gate metric
    assert [c["metric"].removeprefix("eval/vs_start_") for c in expected] == [
        "avg_rank", "p_value", "deal_in_rate", "win_rate", "win_per_deal_in"]
    assert not all(c["passed"] for c in expected)  # a tiny student is not ready
    done = subprocess.run([sys.executable, TRAIN, "+experiment=phase3", f"pipeline.source={phase2}",
                           "transition@pipeline.stages.league.transition=from_student_ready",
                           "tracking=none"],  # not debug=tiny: it lowers the league's gate
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode != 0
    failed = [c for c in expected if not c["passed"]]
    line = next(x for x in done.stderr.splitlines() if "gate failed" in x)
    for c in failed:
        assert f"{c['metric']} = {c['value']:.6g}, needs {c['op']} {c['threshold']:g}" in line
    assert line.endswith("league) did not start")
    (run,) = (tmp_path / "outputs" / "runs").iterdir()
    record = json.loads(next(run.glob("phase*/gate.json")).read_text())
    assert record["passed"] is False
    assert json.dumps(record["checks"]) == json.dumps(expected)  # as text: a nan value equals itself
    assert not (run / "phase3" / "checkpoints").exists()
