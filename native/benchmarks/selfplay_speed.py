"""Self-play throughput of meeple_native.SelfPlay with a trivial numpy evaluator.

    python native/benchmarks/selfplay_speed.py [--games 64] [--sims 100] [--out f.json]

Measures simulations/s, positions/s, mean batch fill, queue latency and
evaluator idle share for W in {1, 2} and batch sizes {1, 16, 64}, with the
evaluation cache on (default) and off, plus the built-in C++ uniform evaluator
(no Python in the loop) and the single-tree MCTS without any queue.
Numbers, not assertions: tests never check speed.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import meeple_native as mn


def trivial(planes, legal):
    n = len(planes)
    return np.zeros((n, 7), np.float32), np.zeros(n, np.float32)


def config(workers: int, batch: int) -> dict:
    # enough leaves in flight per worker to fill two batches (double buffering)
    per_worker = max(1, 2 * batch // workers)
    leaves = 1 if batch == 1 else 4
    games = max(1, per_worker // leaves)
    return dict(
        num_workers=workers, games_per_worker=games, leaves_per_game=leaves, batch_size=batch
    )


def run(evaluator, games: int, sims: int, cache: int, repeats: int, **cfg) -> dict:
    """Median (by simulations/s) of `repeats` runs: the 2-core VMs are noisy."""
    sp = mn.SelfPlay(
        evaluator, num_simulations=sims, cache_size=cache, timeout_us=1000, seed=1, **cfg
    )
    sp.run(max(2, games // 8))  # warm up (arenas, caches)
    runs = sorted(
        (sp.run(games)["metrics"] for _ in range(repeats)), key=lambda m: m["simulations_per_s"]
    )
    m = runs[len(runs) // 2]
    keep = [
        "simulations_per_s",
        "positions_per_s",
        "games_per_h",
        "mean_batch_size",
        "mean_fill_ratio",
        "queue_latency_p50_us",
        "queue_latency_p99_us",
        "evaluator_idle_fraction",
        "cache_hit_rate",
        "collisions",
        "wall_s",
    ]
    return {**cfg, "cache_size": cache, **{k: m[k] for k in keep}}


def tree_only(sims: int, positions: int = 200) -> float:
    m = mn.MCTS(num_simulations=sims)
    t0 = time.perf_counter()
    for _ in range(positions):
        m.search(mn.Connect4())
    return positions * sims / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--games", type=int, default=64)
    ap.add_argument("--sims", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out")
    a = ap.parse_args()
    rows = []
    for ev_name, ev in [("numpy", trivial), ("builtin", None)]:
        for cache in [65536, 0] if ev_name == "numpy" else [0]:
            for workers in (1, 2):
                for batch in (1, 16, 64):
                    r = {
                        "evaluator": ev_name,
                        **run(ev, a.games, a.sims, cache, a.repeats, **config(workers, batch)),
                    }
                    rows.append(r)
                    print(
                        f"{ev_name:7s} cache={cache:5d} W={workers} G={r['games_per_worker']:2d} "
                        f"L={r['leaves_per_game']} B={batch:2d}: {r['simulations_per_s']:9.0f} sims/s "
                        f"{r['positions_per_s']:7.0f} pos/s fill={r['mean_fill_ratio']:.2f} "
                        f"lat p50/p99={r['queue_latency_p50_us']:.0f}/{r['queue_latency_p99_us']:.0f} us "
                        f"idle={r['evaluator_idle_fraction']:.2f} hit={r['cache_hit_rate']:.2f}",
                        flush=True,
                    )
    tree = max(tree_only(a.sims * 8) for _ in range(a.repeats))
    print(f"single-tree MCTS, built-in uniform evaluator, no queue: {tree:.0f} sims/s")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"rows": rows, "tree_only_sims_per_s": tree}, f, indent=1)


if __name__ == "__main__":
    main()
