"""Env collection throughput: the single-process default against Ray actors (and processes).

    python -m meeple.bench collect [--actors 1 2 4] [--rollouts 20] [--out collect.json]

CartPole PPO's collection as ``python train.py`` runs it (conf defaults: 8 envs a worker, 128
steps a rollout, the untrained MLP policy), without the learner: each row times ``--rollouts``
rollouts after one warm-up rollout, pushing the policy's weights at every rollout boundary as
training does. Rows: ``sync`` (one worker in this process: the default), ``ray`` with 1, 2, 4
actors (``collector=ray``; each actor steps its own 8 envs, so a rollout holds actors x 1,024
frames) and ``multisync`` with as many worker processes. Reported: frames/s and the ratio to the
default. On a 2-core machine more than 2 workers only share the cores.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from functools import partial
from typing import Any

from meeple.jsonio import write_json_atomic


def measure(collector_type: str, workers: int, rollouts: int) -> dict[str, Any]:
    from meeple.cli.train import build_run
    from meeple.config.compose import compose_config
    from meeple.data.collectors import build_collector, collector_options

    cfg = compose_config(["tracking=none", "checkpoint=none", f"env.num_workers={workers}",
                          f"collector={collector_type}"])
    parts = build_run(cfg)
    dm, policy = parts.datamodule, parts.module.policy
    env_fns = [partial(dm.env_fn, num_envs=dm.num_envs, seed=s) for s in dm.worker_seeds]
    start = time.perf_counter()
    collector = build_collector(collector_type, env_fns, policy, frames_per_batch=dm.frames_per_batch,
                                options=collector_options(cfg.collector))
    try:
        batches = iter(collector)
        next(batches)  # warm-up: actors and env processes started, first episodes reset
        setup_s = time.perf_counter() - start
        frames, start = 0, time.perf_counter()
        for _ in range(rollouts):
            collector.update_policy_weights_()
            frames += next(batches).numel()
        seconds = time.perf_counter() - start
    finally:
        collector.shutdown()
    return dict(collector=collector_type, workers=workers, frames=frames, seconds=seconds,
                frames_per_s=frames / seconds, setup_s=setup_s)


def main(argv: list[str] | None = None) -> int:
    """Env collection frames/s: in-process default vs Ray actors (1, 2, 4) vs worker processes"""
    parser = argparse.ArgumentParser(prog="python -m meeple.bench collect", description=__doc__.splitlines()[0])
    parser.add_argument("--actors", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--rollouts", type=int, default=20)
    parser.add_argument("--no-multisync", action="store_true", help="leave out the worker-process rows")
    parser.add_argument("--out", default=None, help="write the rows as JSON")
    args = parser.parse_args(argv)
    try:
        import ray  # noqa: F401
    except ImportError:
        print("meeple: the ray rows need Ray: pip install -e '.[ray]' (then run this again)", file=sys.stderr)
        return 2
    plan = [("sync", 1)] + [("ray", n) for n in args.actors]
    if not args.no_multisync:
        plan += [("multisync", n) for n in args.actors if n > 1]
    rows = [measure(collector_type, workers, args.rollouts) for collector_type, workers in plan]
    base = rows[0]["frames_per_s"]
    print(f"{'collector':10s} {'workers':>7s} {'frames/s':>10s} {'x default':>9s} {'start-up s':>10s}")
    for row in rows:
        row["ratio_to_default"] = row["frames_per_s"] / base
        print(f"{row['collector']:10s} {row['workers']:7d} {row['frames_per_s']:10.0f} {row['ratio_to_default']:9.2f} "
              f"{row['setup_s']:10.1f}")
    if args.out:
        write_json_atomic(args.out, dict(rows=rows, machine=dict(cpus=os.cpu_count(), python=platform.python_version()),
                                         rollouts=args.rollouts))
    return 0
