"""How strong a trained Connect Four AlphaZero network is, from its checkpoint:

    python -m meeple_connect4.strength outputs/runs/<run>            # newest checkpoint of a run
    python -m meeple_connect4.strength <ckpt.pt> --agent-simulations 32 --mcts-rollouts 1000 --games 20

Measures, against references the run never trained on:

* the raw policy's and MCTS's (``--agent-simulations``, the training budget by default, one leaf
  in flight unless ``--leaves-in-flight``) share of
  optimal moves on meeple's solver-labelled middle-game and end-game sets (the benchmark callback's
  positions: ``generated_seed`` 2026, 200 each);
* ``--games`` games as the first player against pure MCTS with ``--mcts-rollouts`` random
  playouts per move (the issue's bar: no loss). The agent's search is deterministic; the
  opponent's rollouts differ from game to game (seeds 0, 1, ...).

Prints one table and, with ``--json``, writes the numbers.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

from meeple.errors import MeepleError
from meeple.export.policy import load_alphazero_network
from meeple.phases.alphazero.evaluator import TorchEvaluator
from meeple_connect4.arena import MCTSPlayer, play_game
from meeple_connect4.benchmark import generated_benchmarks, player_moves, policy_moves
from meeple_native import Solver


def load_network(path: str | Path) -> torch.nn.Module:
    """The best network of an AlphaZero checkpoint (file, gate file or run directory)."""
    return load_alphazero_network(path, "connect4")


def first_player_games(agent: MCTSPlayer, games: int, rollouts: int) -> dict[str, int]:
    """``games`` games with the agent first against pure MCTS (``rollouts`` playouts a move)."""
    out = {"wins": 0, "draws": 0, "losses": 0}
    for g in range(games):
        opponent = MCTSPlayer("rollout", num_simulations=rollouts, leaves_in_flight=1, seed=g)
        winner = play_game((agent, opponent)).winner()
        out["draws" if winner is None else ("wins" if winner == 0 else "losses")] += 1
    return out


@torch.no_grad()  # scoped: a process-wide switch leaked into whatever ran next in the process
def strength(net: torch.nn.Module, *, agent_simulations: int, mcts_rollouts: int, games: int,
             leaves_in_flight: int = 1, positions: int = 200, seed: int = 2026) -> dict[str, Any]:
    """The numbers of the module docstring, as a flat dict."""
    evaluator = TorchEvaluator(net)
    agent = MCTSPlayer(evaluator, num_simulations=agent_simulations, leaves_in_flight=leaves_in_flight, seed=0)
    metrics: dict[str, Any] = {"agent_simulations": agent_simulations, "leaves_in_flight": leaves_in_flight}
    for bench in generated_benchmarks(positions, seed, Solver(tt_log2=22)):
        optimal, correct = bench.shares(policy_moves(net, bench))
        metrics[f"{bench.name}/optimal_policy"], metrics[f"{bench.name}/correct_policy"] = optimal, correct
        optimal, correct = bench.shares(player_moves(agent, bench))
        metrics[f"{bench.name}/optimal_mcts"], metrics[f"{bench.name}/correct_mcts"] = optimal, correct
        metrics[f"{bench.name}/optimal_random"] = bench.random_shares()[0]
    if games:
        start = time.perf_counter()
        result = first_player_games(agent, games, mcts_rollouts)
        metrics.update({f"vs_mcts{mcts_rollouts}_first/{k}": v for k, v in result.items()})
        metrics[f"vs_mcts{mcts_rollouts}_first/seconds"] = time.perf_counter() - start
    return metrics


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m meeple_connect4.strength", description=__doc__.split("\n\n")[0])
    p.add_argument("checkpoint", help="an alphazero checkpoint file, gate file or run directory")
    p.add_argument("--agent-simulations", type=int, default=32, help="MCTS simulations of the agent (default 32)")
    p.add_argument("--mcts-rollouts", type=int, default=1000, help="playouts per move of the pure-MCTS opponent")
    p.add_argument("--games", type=int, default=20, help="games as the first player against pure MCTS")
    p.add_argument("--leaves-in-flight", type=int, default=1,
                   help="leaves the agent's search evaluates per batch (default 1: no virtual loss; the "
                        "training benchmark's players use 8, which at 32 simulations weakens the search)")
    p.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for name in ("agent_simulations", "mcts_rollouts", "leaves_in_flight"):
        if getattr(args, name) < 1:
            print(f"meeple: error: --{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}", file=sys.stderr)
            return 2
    try:
        net = load_network(args.checkpoint)
    except MeepleError as err:
        print(f"meeple: error: {err}", file=sys.stderr)
        return 2
    metrics = strength(net, agent_simulations=args.agent_simulations, mcts_rollouts=args.mcts_rollouts,
                       games=max(args.games, 0), leaves_in_flight=args.leaves_in_flight)
    width = max(len(k) for k in metrics)
    for key, value in metrics.items():
        print(f"{key:<{width}}  {value:.3f}" if isinstance(value, float) else f"{key:<{width}}  {value}")
    if args.json is not None:
        args.json.write_text(json.dumps(metrics, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
