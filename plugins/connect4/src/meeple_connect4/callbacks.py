"""Connect Four strength benchmarks of the AlphaZero phase's best network, every few iterations.

Referenced from this plugin's ``conf/recipe/connect4_alphazero.yaml``
(``phase.callbacks.benchmark._target_``); the phase
puts its gate first, so the benchmark measures the network that plays self-play, i.e. the
best one after this iteration's gate.
"""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path

import lightning as L
import numpy as np

from meeple.phases.alphazero.benchmark import IterationBenchmark, alternating_replays, module_device
from meeple.phases.alphazero.evaluator import TorchEvaluator
from meeple.tracking import keys
from meeple.viewer.replay import Replay
from meeple_connect4.arena import MCTSPlayer, SolverPlayer, play_from_positions, play_match
from meeple_connect4.benchmark import (
    MIDDLE,
    SETS,
    BenchmarkSet,
    generated_benchmarks,
    load_benchmark,
    player_moves,
    policy_moves,
)
from meeple_connect4.replay import record_game
from meeple_native import Solver


def _project_path(path: str) -> Path:
    """Relative paths are relative to the project root (the folder holding conf/), not the cwd."""
    from meeple.config.compose import conf_dir

    return Path(path) if Path(path).is_absolute() else conf_dir().parent / path


class Connect4Benchmark(IterationBenchmark):
    """Every ``every_n_iterations`` (and after the last), measures the best network:

    * win rate against pure MCTS (random rollouts, ``mcts_opponent_simulations``), colours alternating;
    * win rate against the exact solver from ``solver_games`` positions of the generated
      middle-game set that the side to move (the agent) does not lose, and the share of those
      games where the agent kept the position's game-theoretic value;
    * the share of optimal (and of value-keeping) moves on the generated sets
      (``generated_positions`` each, from ``generated_seed``) and, with ``benchmark_dir``, on
      Pons' ``Test_L3_R1`` and ``Test_L2_R1``: by the raw policy on every position, and by
      MCTS with the network on the first ``mcts_positions``.

    Then ``replays`` games of the same agent against the same pure MCTS, colours alternating, go to
    the viewer (:mod:`meeple_connect4.replay`).
    """

    def __init__(self, every_n_iterations: int, agent_simulations: int, mcts_games: int,
                 mcts_opponent_simulations: int, solver_games: int, mcts_positions: int,
                 benchmark_dir: str | None, generated_positions: int = 200,
                 generated_seed: int = 2026, replays: int = 0) -> None:
        super().__init__(every_n_iterations, replays)
        self.agent_simulations = agent_simulations
        self.mcts_games = mcts_games
        self.mcts_opponent_simulations = mcts_opponent_simulations
        self.solver_games = solver_games
        self.mcts_positions = mcts_positions
        self.benchmark_dir = _project_path(benchmark_dir) if benchmark_dir else None
        # A fixed seed, not the run's: every run (and every user) measures on the same positions.
        self.generated_positions = generated_positions
        self.generated_seed = generated_seed
        self.benches: list[BenchmarkSet] = []
        self._solver: Solver | None = None
        self._players: tuple[MCTSPlayer, MCTSPlayer | None] | None = None

    def prepare(self) -> None:
        self._solver = Solver(tt_log2=22)
        # ~3 s for 2 x 200 positions on one core; Pons' missing files fail here, before any self-play.
        self.benches = generated_benchmarks(self.generated_positions, self.generated_seed, self._solver)
        if self.benchmark_dir is not None:
            self.benches += [load_benchmark(self.benchmark_dir / name, self._solver) for name in SETS]

    def evaluate_module(self, pl_module: L.LightningModule) -> dict[str, float]:
        start = time.perf_counter()
        device = module_device(pl_module)
        agent = MCTSPlayer(TorchEvaluator(pl_module.best, device), num_simulations=self.agent_simulations,
                           seed=next(self._seeds))
        metrics: dict[str, float] = {}
        pure = None
        if self.mcts_games:
            pure = MCTSPlayer("rollout", num_simulations=self.mcts_opponent_simulations, leaves_in_flight=1,
                              seed=next(self._seeds))
            metrics[keys.EVAL_VS_MCTS] = play_match(agent, pure, self.mcts_games).score
        self._players = agent, pure  # the replays' (no seed drawn for them: the metrics stay as they were)
        middle = next(b for b in self.benches if b.name == MIDDLE)
        if self.solver_games:
            rng = np.random.default_rng(next(self._seeds))
            not_lost = np.flatnonzero(middle.scores >= 0)  # the agent, to move, does not lose
            picks = rng.choice(not_lost, size=min(self.solver_games, len(not_lost)), replace=False)
            result, kept = play_from_positions(agent, SolverPlayer(self._solver, seed=next(self._seeds)),
                                               [middle.positions[i] for i in picks], middle.scores[picks])
            metrics[keys.EVAL_VS_SOLVER] = result.score
            metrics[keys.EVAL_SOLVER_KEPT] = kept / max(result.games, 1)
        for bench in self.benches:
            optimal, correct = bench.shares(policy_moves(pl_module.best, bench, device))
            metrics[keys.optimal_share_key(bench.name, "policy")] = optimal
            metrics[keys.optimal_share_key(bench.name, "policy", "correct")] = correct
            if self.mcts_positions:
                optimal, correct = bench.shares(player_moves(agent, bench, self.mcts_positions))
                metrics[keys.optimal_share_key(bench.name, "mcts")] = optimal
                metrics[keys.optimal_share_key(bench.name, "mcts", "correct")] = correct
            floor, _ = bench.random_shares()
            metrics[keys.optimal_share_key(bench.name, "random")] = floor
        return self.finish(metrics, start)

    def replay_games(self, pl_module: L.LightningModule, count: int, iteration: int) -> list[Replay]:
        agent, pure = self._players
        if pure is None:  # the evaluation played no match: an opponent of the same strength
            pure = MCTSPlayer("rollout", num_simulations=self.mcts_opponent_simulations, leaves_in_flight=1,
                              seed=iteration)
        return alternating_replays(partial(record_game, opening_moves=2), agent, pure,
                                   f"pure MCTS ({self.mcts_opponent_simulations} rollouts)", count,
                                   f"connect4 iteration {iteration}")
