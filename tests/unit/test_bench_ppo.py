"""The PPO benchmark's code paths on tiny runs, so it cannot silently rot (no timing checks)."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from meeple.bench import benchmarks
from meeple.bench.__main__ import main as bench_main
from meeple.bench.common import RESULT_FIELDS, PPOHparams
from meeple.config.compose import compose_config

# Two rollouts of 2 envs x 32 steps, evaluated after each on 2 short greedy episodes.
TINY = [
    "env.num_envs=2",
    "phase.rollout_steps=32",
    "phase.total_frames=128",
    "phase.minibatch_size=32",
    "phase.ppo_epochs=2",
    "phase.eval.every_n_rollouts=1",
    "phase.eval.episodes=2",
    "phase.eval.max_steps=20",
]


@pytest.fixture(autouse=True)
def one_torch_thread():
    """As in the benchmark's workers (and much faster than oversubscribed threads on small CPUs)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny_hparams() -> PPOHparams:
    return PPOHparams.from_config(compose_config(TINY))


def check_result(result: dict, hp: PPOHparams) -> None:
    assert set(RESULT_FIELDS) <= set(result)
    assert result["solved"] is False  # 20-step episodes cannot reach 475
    assert result["frames_to_solve"] == hp.num_rollouts * hp.frames_per_batch == 128
    assert result["rollouts_to_solve"] == 2
    assert [e["rollouts"] for e in result["evals"]] == [1, 2]
    assert all(0 < e["mean_return"] <= hp.eval_max_steps for e in result["evals"])
    for key in ("time_to_solve_s", "cpu_time_to_solve_s", "collect_s", "update_s", "eval_s", "collect_fps", "update_fps", "overall_fps"):
        assert result[key] > 0, key
    assert result["collect_s"] + result["eval_s"] <= result["time_to_solve_s"]


def test_hparams_come_from_the_default_config():
    cfg = compose_config()
    hp = PPOHparams.from_config(cfg)
    assert hp.env_id == cfg.env.id
    assert hp.num_envs == cfg.env.num_envs
    assert hp.rollout_steps == cfg.phase.rollout_steps
    assert hp.lr == cfg.phase.lr and hp.adam_eps == cfg.phase.optimizer.eps
    assert hp.hidden == tuple(cfg.model.hidden)
    assert hp.stop_return == cfg.phase.stop.eval_return
    assert hp.lr_at(0) == hp.lr and hp.lr_at(hp.num_rollouts) == 0.0
    assert hp.is_eval_rollout(hp.eval_every_n_rollouts) and hp.is_eval_rollout(hp.num_rollouts)
    assert not hp.is_eval_rollout(1)


@pytest.mark.parametrize("impl", ["torchrl", "plain"])
def test_baseline_trains_and_reports(impl, tiny_hparams):
    from meeple.bench import plain_ppo, torchrl_ppo

    train = {"torchrl": torchrl_ppo.train, "plain": plain_ppo.train}[impl]
    check_result(train(tiny_hparams, seed=0), tiny_hparams)


def test_baselines_stop_at_the_threshold(tiny_hparams):
    from meeple.bench import plain_ppo

    hp = dataclasses.replace(tiny_hparams, stop_return=1.0)  # any episode reaches 1
    result = plain_ppo.train(hp, seed=0)
    assert result["solved"] and result["rollouts_to_solve"] == 1 and len(result["evals"]) == 1


def test_meeple_run_reports(tiny_hparams, tmp_path):
    from meeple.bench.meeple_run import train

    result = train([*TINY, "tracking=none"], seed=0, tracking_dir=str(tmp_path))
    check_result(result, tiny_hparams)


def test_report_and_json(tmp_path, tiny_hparams):
    from meeple.bench import plain_ppo
    from meeple.bench.ppo import ratios, render, summarize, with_derived, write_json_atomic

    base = plain_ppo.train(tiny_hparams, seed=0)
    runs = [
        with_derived({**base, "impl": impl, "seed": seed, "process_s": 1.0})
        for impl in ("meeple", "torchrl", "plain")
        for seed in (1, 2)
    ]
    runs.append({"impl": "meeple", "seed": 3, "error": "worker exit 1", "log_tail": [], "process_s": 0.5})
    summary = summarize(runs, ["meeple", "torchrl", "plain"])
    assert summary["meeple"]["runs"] == 3 and summary["meeple"]["errors"] == 1
    assert summary["plain"]["unsolved_seeds"] == [1, 2]
    table = ratios(summary)
    assert set(table) == {"meeple/torchrl", "meeple/plain"}
    assert table["meeple/plain"]["time_to_solve"]["mean"] == pytest.approx(1.0)
    render(summary, table, tiny_hparams.to_dict())
    out = tmp_path / "sub" / "ppo.json"
    write_json_atomic(out, {"summary": summary, "ratios": table})
    assert json.loads(out.read_text())["ratios"] == table
    assert [p.name for p in out.parent.iterdir()] == ["ppo.json"]


def test_cli_lists_and_rejects(capsys):
    assert bench_main([]) == 0
    assert "ppo" in capsys.readouterr().out
    assert bench_main(["nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown benchmark 'nope'" in err and ", ".join(sorted(benchmarks())) in err
