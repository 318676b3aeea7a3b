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

from meeple.cli.train import build_run
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
        collector._restart_fn = None  # without replacements a death is an error naming the actor
        os.kill(collector.actor_pids()[0], signal.SIGKILL)
        with pytest.raises(PeerLost, match="Ray actor 0 of collector=ray died"):
            next(batches)
    finally:
        collector.shutdown()
    assert not ray.is_initialized()


def test_ray_without_the_package_names_the_extra(monkeypatch, compose):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    from meeple.errors import ConfigError

    with pytest.raises(ConfigError, match=r"collector=ray needs Ray: pip install -e '.\[ray\]'"):
        RayActorsCollector([lambda: None], None, frames_per_batch=8)
