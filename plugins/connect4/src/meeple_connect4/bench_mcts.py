"""MCTS benchmark: meeple's native search and self-play against OpenSpiel's C++ MCTS.

    python -m meeple.bench mcts --out mcts.json [--positions 20] [--simulations 1000] [--games 128]

In one run, on the same seeded Connect Four positions (random openings of 4-12 plies):

(a) tree: simulations/s of one ``meeple_native.MCTS`` tree on one thread with the built-in
    uniform evaluator (priors uniform, value 0: no network, no rollouts);
(b) rollouts: simulations/s with one random playout per leaf, ours (``evaluator="rollout"``)
    against OpenSpiel's ``MCTSBot`` with ``RandomRolloutEvaluator(1)`` (C++ through pyspiel),
    both single-threaded with the same number of simulations per search;
(c) self-play: end-to-end positions/s of ``SelfPlay`` with the default AlphaZero network on
    CPU (conf: +experiment=connect4_alphazero), and the evaluation queue's batch fill
    ratio and evaluator idle fraction over the whole run (``--games`` several times the games
    in flight, so the drained queue at the end weighs little).

Goals (issue 3): (b) >= 10x OpenSpiel per core; (a) >= 1M simulations/s per core;
(c) fill ratio >= 0.9 with the evaluator idle < 10%. Each is printed as met or not.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

from meeple.jsonio import write_json_atomic


def _positions(n: int, seed: int) -> list[list[int]]:
    """Random openings of 4-12 plies that do not end the game (moves 0-based)."""
    from meeple_native import Connect4

    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        game, moves = Connect4(), []
        for _ in range(int(rng.integers(4, 13))):
            legal = [c for c in game.legal_moves() if not game.is_winning_move(c)]
            if not legal:
                break
            c = int(rng.choice(legal))
            game.play(c)
            moves.append(c)
        if not game.is_terminal() and len(moves) >= 4:
            out.append(moves)
    return out


def bench_tree(positions: list[list[int]], simulations: int) -> dict[str, float]:
    from meeple_native import MCTS, Connect4

    search = MCTS(num_simulations=simulations, seed=0)
    sims, start = 0, time.perf_counter()
    for moves in positions:
        sims += search.search(Connect4.from_moves("".join(str(c + 1) for c in moves)), "uniform")["simulations"]
    wall = time.perf_counter() - start
    return {"simulations": sims, "wall_s": wall, "sims_per_s": sims / wall}


def bench_rollouts(positions: list[list[int]], simulations: int) -> dict[str, dict[str, float]]:
    import pyspiel

    from meeple_native import MCTS, Connect4

    ours = MCTS(num_simulations=simulations, leaves_in_flight=1, seed=0)
    start = time.perf_counter()
    sims = 0
    for moves in positions:
        sims += ours.search(Connect4.from_moves("".join(str(c + 1) for c in moves)), "rollout")["simulations"]
    our_wall = time.perf_counter() - start

    game = pyspiel.load_game("connect_four")
    bot = pyspiel.MCTSBot(game, pyspiel.RandomRolloutEvaluator(1, 0), 2.0, simulations, 1000, False, 0, False)
    start = time.perf_counter()
    for moves in positions:
        state = game.new_initial_state()
        for c in moves:
            state.apply_action(c)
        bot.step(state)
    their_wall = time.perf_counter() - start
    theirs = simulations * len(positions)
    return {
        "meeple": {"simulations": sims, "wall_s": our_wall, "sims_per_s": sims / our_wall},
        "openspiel": {"simulations": theirs, "wall_s": their_wall, "sims_per_s": theirs / their_wall},
    }


def bench_selfplay(games: int, overrides: list[str]) -> dict[str, Any]:
    import torch
    from hydra.utils import instantiate

    from meeple.config.compose import compose_config
    from meeple.phases.alphazero.evaluator import TorchEvaluator
    from meeple.plugins.registry import load_game

    cfg = compose_config(["+experiment=connect4_alphazero", *overrides])
    torch.set_num_threads(int(cfg.hardware.torch_threads))
    game = load_game(cfg.phase.game)
    net = instantiate(cfg.model)(game.planes_shape, game.num_actions).eval()
    kwargs = dict(cfg.phase.selfplay)
    evaluator = TorchEvaluator(net)
    buffers = evaluator.planes_buffers(int(kwargs["batch_size"]), game.planes_shape)
    with contextlib.closing(game.selfplay_engine(evaluator, seed=0, planes_buffers=buffers,
                                                 **kwargs)) as engine:  # fmt: skip
        out = engine.run(games)
    m = out["metrics"]
    hist = np.asarray(m["batch_size_hist"], dtype=float)
    batch = int(kwargs["batch_size"])
    return {
        "games": len(out["moves"]),
        "positions_per_s": m["positions_per_s"],
        "simulations_per_s": m["simulations_per_s"],
        "mean_fill_ratio": m["mean_fill_ratio"],
        "full_batch_share": float(hist[batch] / hist.sum()) if hist.sum() else 0.0,
        "evaluator_idle_fraction": m["evaluator_idle_fraction"],
        "queue_latency_p50_us": m["queue_latency_p50_us"],
        "queue_latency_p99_us": m["queue_latency_p99_us"],
        "cache_hit_rate": m["cache_hit_rate"],
        "batch_size": batch,
        "network": {k: cfg.model[k] for k in ("channels", "blocks")},
        "engine": kwargs,
    }


def main(argv: list[str] | None = None) -> int:
    """Connect Four MCTS: native tree and rollout search vs OpenSpiel's MCTSBot, self-play queue fill"""
    parser = argparse.ArgumentParser(prog="python -m meeple.bench mcts", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="write the results here (JSON)")
    parser.add_argument("--positions", type=int, default=20)
    parser.add_argument("--simulations", type=int, default=1000, help="per search, rollout MCTS (b)")
    parser.add_argument("--tree-simulations", type=int, default=20000, help="per search, uniform tree (a)")
    parser.add_argument("--games", type=int, default=256, help="self-play games (c)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("overrides", nargs="*", help="config overrides for (c), e.g. model.channels=64")
    args = parser.parse_args(argv)

    positions = _positions(args.positions, args.seed)
    print(f"{len(positions)} positions; (a) uniform tree, {args.tree_simulations} simulations per search ...")
    tree = bench_tree(positions, args.tree_simulations)
    print(f"(b) random rollouts, {args.simulations} simulations per search, meeple vs OpenSpiel MCTSBot ...")
    rollouts = bench_rollouts(positions, args.simulations)
    print(f"(c) self-play, {args.games} games with the default network ...")
    selfplay = bench_selfplay(args.games, args.overrides)

    ratio = rollouts["meeple"]["sims_per_s"] / rollouts["openspiel"]["sims_per_s"]
    goals = {
        "rollout_sims_vs_openspiel_>=10x": ratio >= 10,
        "tree_sims_per_s_>=1M": tree["sims_per_s"] >= 1e6,
        "fill_ratio_>=0.9": selfplay["mean_fill_ratio"] >= 0.9,
        "evaluator_idle_<10%": selfplay["evaluator_idle_fraction"] < 0.10,
    }
    result = {
        "tree": tree, "rollouts": rollouts, "rollout_ratio_meeple_over_openspiel": ratio, "selfplay": selfplay,
        "goals": goals,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "load_avg": os.getloadavg()},
    }
    print(f"(a) tree:      {tree['sims_per_s']:,.0f} simulations/s on one thread")
    print(f"(b) rollouts:  meeple {rollouts['meeple']['sims_per_s']:,.0f}/s, OpenSpiel "
          f"{rollouts['openspiel']['sims_per_s']:,.0f}/s  -> {ratio:.1f}x")
    print(f"(c) self-play: {selfplay['positions_per_s']:,.0f} positions/s, {selfplay['simulations_per_s']:,.0f} "
          f"simulations/s, fill {selfplay['mean_fill_ratio']:.2f} ({100 * selfplay['full_batch_share']:.0f}% of batches full), "
          f"evaluator idle {100 * selfplay['evaluator_idle_fraction']:.0f}%, queue p50/p99 "
          f"{selfplay['queue_latency_p50_us']:.0f}/{selfplay['queue_latency_p99_us']:.0f} us")
    for goal, met in goals.items():
        print(f"  goal {goal}: {'met' if met else 'NOT met'}")
    if args.out is not None:
        write_json_atomic(args.out, result)
        print(f"wrote {args.out}")
    return 0
