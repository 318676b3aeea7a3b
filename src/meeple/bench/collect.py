"""Collection throughput: the single-process default against Ray actors (``collector=ray``).

    python -m meeple.bench collect [--actors 1 2 4] [--only ppo|alphazero] [--az-experiment RECIPE]
                                   [--out collect.json]

PPO (frames/s): PPO's collection as ``python train.py`` runs it (the default env: 8 envs a
worker, 128 steps a rollout, the untrained MLP policy), without the learner: each row times
``--rollouts`` rollouts after one warm-up rollout, pushing the policy's weights at every rollout
boundary as training does. Rows: ``sync`` (one worker in this process: the default), ``ray`` with
1, 2, 4 actors (each actor steps its own 8 envs, so a rollout holds actors x 1,024 frames) and
``multisync`` with as many worker processes.

AlphaZero (positions/s): self-play as ``python train.py +experiment=RECIPE`` plays it, RECIPE an
AlphaZero recipe of a game plugin (``--az-experiment``; without it the table is left out)
(its engine options, its untrained network), without training: each row times ``--iterations``
rounds of ``--games`` games (one iteration's worth) after a warm-up round of 8, sending the
network's weights with every round. Rows: ``local`` (the engine in this process with the
experiment's torch threads: the default) and ``ray`` with 1, 2, 4 actors (``--cpus-per-actor``
torch threads each, default 1; the games of a round split between them by game id). Reported: the rate and the ratio to the
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


def measure_ppo(collector_type: str, workers: int, rollouts: int) -> dict[str, Any]:
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


def measure_selfplay(experiment: str, actors: int, games: int, iterations: int,
                     cpus_per_actor: float = 1) -> dict[str, Any]:
    """Self-play of ``+experiment=<experiment>``; ``actors`` 0: the engine in this process."""
    import torch

    from meeple.cli.train import build_run
    from meeple.config.compose import compose_config

    ray_overrides = (["collector=ray", f"collector.actors={actors}", f"collector.cpus_per_actor={cpus_per_actor}"]
                     if actors else [])
    cfg = compose_config([f"+experiment={experiment}", "tracking=none", "checkpoint=none", *ray_overrides])
    torch.set_num_threads(int(cfg.hardware.torch_threads))
    dm = build_run(cfg).datamodule
    start = time.perf_counter()
    try:
        dm._start()  # the engine (and the actors) the phase's first iteration starts
        threads = getattr(dm.engine, "torch_threads", torch.get_num_threads())  # an actor's, or this process's
        dm.engine.run(8)  # warm-up: actors started, network copies loaded
        setup_s = time.perf_counter() - start
        positions = played = 0
        start = time.perf_counter()
        for _ in range(iterations):
            out = dm.engine.run(games)
            positions, played = positions + len(out["value"]), played + len(out["moves"])
        seconds = time.perf_counter() - start
    finally:
        dm.teardown("fit")
    return dict(collector="ray" if actors else "local", workers=actors or 1, games=played, positions=positions,
                seconds=seconds, positions_per_s=positions / seconds, setup_s=setup_s, torch_threads=threads)


def _print_table(rows: list[dict[str, Any]], rate: str) -> None:
    base = rows[0][rate]
    print(f"{'collector':10s} {'workers':>7s} {rate:>15s} {'x default':>9s} {'start-up s':>10s}")
    for row in rows:
        row["ratio_to_default"] = row[rate] / base
        print(f"{row['collector']:10s} {row['workers']:7d} {row[rate]:15.0f} {row['ratio_to_default']:9.2f} "
              f"{row['setup_s']:10.1f}")


def main(argv: list[str] | None = None) -> int:
    """Collection rate: in-process default vs Ray actors (1, 2, 4): PPO frames/s, AlphaZero positions/s"""
    parser = argparse.ArgumentParser(prog="python -m meeple.bench collect", description=__doc__.splitlines()[0])
    parser.add_argument("--actors", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--only", choices=("ppo", "alphazero"), default=None, help="one of the two tables")
    parser.add_argument("--rollouts", type=int, default=20, help="PPO: timed rollouts per row")
    parser.add_argument("--no-multisync", action="store_true", help="PPO: leave out the worker-process rows")
    parser.add_argument("--az-experiment", default=None, metavar="RECIPE",
                        help="AlphaZero: the recipe whose self-play is measured (a game plugin's, "
                             "e.g. <game>_alphazero); without it the AlphaZero table is left out")
    parser.add_argument("--games", type=int, default=128, help="AlphaZero: games per timed round")
    parser.add_argument("--iterations", type=int, default=2, help="AlphaZero: timed rounds per row")
    parser.add_argument("--cpus-per-actor", type=float, default=1,
                        help="AlphaZero: collector.cpus_per_actor (each actor's torch threads)")
    parser.add_argument("--out", default=None, help="write the rows as JSON")
    args = parser.parse_args(argv)
    if args.only == "alphazero" and args.az_experiment is None:
        parser.error("--only alphazero needs --az-experiment RECIPE (a game plugin's AlphaZero recipe, e.g. <game>_alphazero)")
    try:
        import ray  # noqa: F401
    except ImportError:
        print("meeple: the ray rows need Ray: pip install -e '.[ray]' (then run this again)", file=sys.stderr)
        return 2
    report: dict[str, Any] = dict(machine=dict(cpus=os.cpu_count(), python=platform.python_version()))
    if args.only in (None, "ppo"):
        plan = [("sync", 1)] + [("ray", n) for n in args.actors]
        if not args.no_multisync:
            plan += [("multisync", n) for n in args.actors if n > 1]
        print(f"PPO collection, the default env ({args.rollouts} rollouts a row)")
        rows = [measure_ppo(collector_type, workers, args.rollouts) for collector_type, workers in plan]
        _print_table(rows, "frames_per_s")
        report.update(ppo=rows, rollouts=args.rollouts)
    if args.only in (None, "alphazero") and args.az_experiment:
        print(f"AlphaZero self-play, +experiment={args.az_experiment} "
              f"({args.iterations} rounds of {args.games} games a row)")
        rows = [measure_selfplay(args.az_experiment, n, args.games, args.iterations, args.cpus_per_actor) for n in [0, *args.actors]]
        _print_table(rows, "positions_per_s")
        report.update(alphazero=rows, az_experiment=args.az_experiment, games=args.games, iterations=args.iterations)
    if args.out:
        write_json_atomic(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
