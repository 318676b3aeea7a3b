"""``collector=ray``: env collection in Ray actors, against a Ray head this module starts and stops
(``ray start --head`` in a temporary folder, 2 logical CPUs)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from functools import partial

import pytest
import ray
import torch

from meeple.cli.train import build_run, train
from meeple.data.ray_actors import RayActorsCollector
from meeple.errors import PeerLost
from tests.conftest import REPO

RAY = [sys.executable, "-m", "ray.scripts.scripts"]


@pytest.fixture(scope="module")
def ray_head():
    # A short path: Ray's Unix sockets live under it (108-byte limit).
    temp = tempfile.mkdtemp(prefix="/tmp/mray")
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    started = subprocess.run([*RAY, "start", "--head", "--num-cpus=2", "--include-dashboard=false",
                              "--disable-usage-stats", f"--temp-dir={temp}"], capture_output=True, text=True,
                             timeout=300, env=env)
    assert started.returncode == 0, started.stderr[-2000:]
    try:
        yield "auto"  # a driver on the head's machine joins it this way
    finally:
        subprocess.run([*RAY, "stop", "--force"], capture_output=True, timeout=120)


def test_ppo_trains_with_two_ray_actors(ray_head, tmp_path):
    done = subprocess.run(
        [sys.executable, str(REPO / "train.py"), "collector=ray", f"collector.address={ray_head}", "env.num_workers=2",
         "debug=tiny", f"checkpoint.root={tmp_path}/runs", f"tracking.uri=sqlite:///{tmp_path}/mlflow.db",
         f"paths.output_root={tmp_path}/out"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    (run,) = (tmp_path / "runs").iterdir()
    record = json.loads((run / "phase0" / "done.json").read_text())
    # 2 actors x 2 envs x the tiny rollout's 16 steps, one rollout: every actor's frames arrived.
    assert record["metrics"]["train/frames"] == 2 * 2 * 16 and record["metrics"]["perf/policy_lag"] == 0


def test_ddp_ranks_collect_through_one_cluster(ray_head, tmp_path):
    # hardware=ddp_cpu: each of the 2 learner ranks joins the running head with its own actor.
    done = subprocess.run(
        [sys.executable, str(REPO / "train.py"), "hardware=ddp_cpu", "collector=ray", f"collector.address={ray_head}",
         "env.num_workers=1", "debug=tiny", f"checkpoint.root={tmp_path}/runs",
         f"tracking.uri=sqlite:///{tmp_path}/mlflow.db", f"paths.output_root={tmp_path}/out"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "collector=ray: 1 Ray actor(s) on auto" in done.stdout  # rank 0's line (rank 1 logs warnings only)
    (run,) = (tmp_path / "runs").iterdir()
    ranks = json.loads((run / "phase0" / "ranks.json").read_text())
    assert ranks[0]["first_rollout_sha256"] != ranks[1]["first_rollout_sha256"]  # each rank's own seeds
    record = json.loads((run / "phase0" / "done.json").read_text())
    assert record["metrics"]["train/frames"] == 2 * 3 * 32  # 2 ranks x 3 tiny rollouts, all through Ray


def test_rollouts_use_the_pushed_weights_and_a_killed_actor_is_replaced(ray_head, compose):
    parts = build_run(compose(["debug=tiny", "env.num_workers=2", "tracking=none", "checkpoint=none"]))
    dm, policy = parts.datamodule, parts.module.policy
    env_fns = [partial(dm.env_fn, num_envs=dm.num_envs, seed=s) for s in dm.worker_seeds]
    replaced = []

    def restart_fn(worker, restarts):
        replaced.append((worker, restarts))
        return partial(dm.env_fn, num_envs=dm.num_envs, seed=1000 + restarts)

    collector = RayActorsCollector(env_fns, policy, frames_per_batch=dm.frames_per_batch, address=ray_head,
                                   restart_fn=restart_fn)
    try:
        batches = iter(collector)
        first = next(batches)
        assert first.batch_size[0] == 2 * dm.num_envs and first.numel() == dm.frames_per_batch
        # The learner's weights reach every actor with the next request: a policy that always
        # picks action 1 acts so in every env of every actor.
        last = [m for m in policy.modules() if hasattr(m, "bias") and m.bias is not None][-1]
        with torch.no_grad():
            last.bias[:] = last.bias.new_tensor([-50.0, 50.0])
        assert bool((next(batches)["action"] == 1).all())

        os.kill(collector.actor_pids()[1], signal.SIGKILL)
        after = next(batches)  # the dead actor's share comes from its replacement
        assert after.numel() == dm.frames_per_batch and replaced == [(1, 1)] and collector.restarts == 1
        collector.pool.restart_args = None  # without replacements a death is an error naming the actor
        os.kill(collector.actor_pids()[0], signal.SIGKILL)
        with pytest.raises(PeerLost, match="Ray actor 0 of collector=ray died"):
            next(batches)
    finally:
        collector.shutdown()
    assert not ray.is_initialized()


def test_an_env_hook_steers_every_actor_and_a_replacement_gets_a_fresh_part_and_the_same_plan(ray_head, compose):
    """The env hook (the league's seating, meeple.phases.league.remote): each actor's part sees its
    env before the first reset and the learner's plan before every rollout; reports come back in
    actor order; a killed actor's replacement is built with a new part and handed the same plan."""
    parts = build_run(compose(["debug=tiny", "env.num_workers=2", "tracking=none", "checkpoint=none"]))
    dm, policy = parts.datamodule, parts.module.policy
    env_fns = [partial(dm.env_fn, num_envs=dm.num_envs, seed=s) for s in dm.worker_seeds]

    class Part:  # defined here: Ray pickles it by value
        def __init__(self, index):
            self.index, self.env, self.plans = index, None, []

        def attach(self, env):
            assert not self.plans, "attach comes before the first plan"
            self.env = env

        def begin(self, plan, weights):
            assert self.env is not None and set(weights) == set(policy.state_dict())
            self.plans.append(plan)

        def end(self):
            return {"index": self.index, "pid": os.getpid(), "plans": list(self.plans),
                    "tables": int(self.env.batch_size[0])}

    class Hook:
        def __init__(self):
            self.parts, self.reports, self.rollout = [], [], 0

        def actor_part(self, index):
            self.parts.append(index)
            return Part(index)

        def plans(self, put, actors):
            self.rollout += 1
            return [f"plan {self.rollout} for {i}" for i in range(actors)]

        def receive(self, reports):
            self.reports.append(reports)

    hook = Hook()
    collector = RayActorsCollector(env_fns, policy, frames_per_batch=dm.frames_per_batch, address=ray_head,
                                   env_hook=hook,
                                   restart_fn=lambda w, r: partial(dm.env_fn, num_envs=dm.num_envs, seed=1000 + r))
    try:
        batches = iter(collector)
        assert next(batches).numel() == dm.frames_per_batch
        first = hook.reports[-1]
        assert [r["index"] for r in first] == [0, 1] and [r["plans"] for r in first] == [["plan 1 for 0"],
                                                                                         ["plan 1 for 1"]]
        assert all(r["tables"] == dm.num_envs for r in first)
        os.kill(first[1]["pid"], signal.SIGKILL)
        next(batches)
        second = hook.reports[-1]
        assert hook.parts == [0, 1, 1]  # a new part for the replacement of actor 1 ...
        assert second[0]["plans"] == ["plan 1 for 0", "plan 2 for 0"]
        assert second[1]["plans"] == ["plan 2 for 1"] and second[1]["pid"] != first[1]["pid"]  # ... given the plan
    finally:
        collector.shutdown()


def test_league_tables_in_two_ray_actors(ray_head, tmp_path):
    """Mahjong phase 3 with collector=ray on the running head: each of 2 actors seats its own 4
    tables from the learner's per-rollout plan (meeple.phases.league.remote); the learner rates the
    games they report and promotes as usual. Here, not beside the mahjong tests: the head's
    `ray stop --force` would kill a Ray instance another test module started meanwhile."""
    from meeple.checkpoint.io import load_verified

    S = "pipeline.stages.league"
    done = subprocess.run(
        [sys.executable, str(REPO / "train.py"), "+experiment=phase3", "debug=tiny", "tracking=none",
         "pipeline.order=[league]", "~pipeline.stages.phase1", "~pipeline.stages.teacher", "~pipeline.stages.student",
         f"transition@{S}.transition=none", f"{S}.transition.gate=null", f"{S}.phase.reference_kl.coef=0", "collector=ray", f"collector.address={ray_head}", "env.num_workers=2",
         f"{S}.phase.total_frames=1920", f"checkpoint.root={tmp_path}/runs",  # 5 rollouts of 2 x 4 tables
         f"paths.output_root={tmp_path}/out"],
        cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    (run,) = (tmp_path / "runs").iterdir()
    latest = load_verified(next(run.glob("*/checkpoints/latest.pt")))
    m = latest["metrics"]
    assert m["train/frames"] == 1920 and m["league/promotions"] == 2 and m["league/pool_size"] == 2
    assert m["league/games"] >= 1 and m["league/learner_sigma"] < 25 / 3  # reported games were rated
    assert m["league/builds"] >= 1  # the actors built the networks they seated
    seats = latest["league"]["seats"]
    assert sum(seats.values()) >= 3 * 8 and seats["latest"] > 0  # every table of both actors was seated
    assert sum(m[f"league/seats_{k}"] for k in ("latest", "pool", "anchor")) == pytest.approx(1.0)


def test_ray_without_the_package_names_the_extra(monkeypatch, compose):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    from meeple.errors import ConfigError

    with pytest.raises(ConfigError, match=r"collector=ray needs Ray: pip install -e '.\[ray\]'"):
        RayActorsCollector([lambda: None], None, frames_per_batch=8)


# AlphaZero: a deterministic self-play setting (tests/alphazero/test_resume.py): one worker, one
# game, one leaf in flight, no cache, so each game is a function of the seed and its id alone.
AZ = ["+experiment=connect4_alphazero", "debug=tiny", "callbacks.progress=null", "tracking=none",
      "phase.iterations=3", "phase.callbacks.curves=null", "phase.selfplay.num_workers=1",
      "phase.selfplay.games_per_worker=1", "phase.selfplay.leaves_per_game=1", "phase.selfplay.cache_size=0"]


def test_alphazero_selfplay_on_two_ray_actors_learns_exactly_what_one_process_learns(
        ray_head, compose, in_tmp, importable_tests):
    from tests.alphazero.test_resume import learning

    local = learning(train(compose([*AZ, "task_name=local"])))
    on_ray = learning(train(compose([*AZ, "task_name=ray", "collector=ray", f"collector.address={ray_head}",
                                     "collector.actors=2"])))
    assert on_ray.pop("selfplay/actors") == 2 and "selfplay/actors" not in local
    # The actors played the same games (game ids split between them) with the pushed weights, so
    # every loss, gate score and strength number of the three iterations is the one-process one.
    assert on_ray == local and local["selfplay/games"] == 3 * 4


def test_a_failed_run_leaves_no_actors_and_no_ray_behind(ray_head, compose, in_tmp, importable_tests):
    from tests.checkpoint.helpers import SimulatedCrash
    from tests.checkpoint.test_resume import stop_after

    with pytest.raises(SimulatedCrash):  # raised at the end of the first iteration, inside fit
        train(compose([*AZ, "collector=ray", f"collector.address={ray_head}", *stop_after(1)]))
    # Lightning tears a datamodule down only after a fit that ends normally; on_exception does it
    # here, or a sweep's next trial would find this trial's actors holding the cluster's CPUs.
    assert not ray.is_initialized()


def test_a_killed_selfplay_actor_is_replaced_and_replays_its_games(ray_head):
    from meeple.nets.az_resnet import build_az_resnet
    from meeple.phases.alphazero.evaluator import TorchEvaluator
    from meeple.phases.alphazero.ray_selfplay import RaySelfPlay
    from meeple.plugins.registry import load_game

    torch.manual_seed(0)
    game = load_game("connect4")
    builder = partial(build_az_resnet, channels=8, blocks=1)
    net = builder(game.planes_shape, game.num_actions).eval()
    options = dict(num_simulations=8, num_workers=1, games_per_worker=1, leaves_per_game=1, cache_size=0)
    local = game.selfplay_engine(TorchEvaluator(net), seed=7, planes_buffers=None, **options)
    remote = RaySelfPlay(lambda: net, game="connect4", net_builder=builder, seed=7, actors=2, address=ray_head,
                         **options)
    try:
        local.next_game_id = remote.next_game_id = 10

        def same(a, b):
            assert list(a["moves"]) == list(b["moves"]) and (a["game_id"] == b["game_id"]).all()
            for key in ("planes", "policy", "value", "game", "ply"):
                assert (a[key] == b[key]).all(), key

        same(local.run(5), remote.run(5))  # 3 + 2 games: ids 10-12 on actor 0, 13-14 on actor 1
        os.kill(remote.actor_pids()[1], signal.SIGKILL)
        same(local.run(4), remote.run(4))  # actor 1's replacement replays ids 17-18
        assert remote.restarts == 1 and remote.next_game_id == local.next_game_id == 19
        remote.pool.restart_args = None
        os.kill(remote.actor_pids()[0], signal.SIGKILL)
        with pytest.raises(PeerLost, match=r"Ray actor 0 of collector=ray \(self-play\) died"):
            remote.run(2)
    finally:
        local.close()
        remote.close()
    assert not ray.is_initialized()
