"""Chess evaluation of the AlphaZero phase's best network, every few iterations.

Referenced from this plugin's ``conf/recipe/chess_alphazero.yaml`` (``phase.callbacks.chess_benchmark``);
the phase puts its gate first, so this measures the network that plays self-play, i.e. the best
one after this iteration's gate.
"""

from __future__ import annotations

import time
from functools import partial

import lightning as L
import numpy as np
import torch

from meeple.phases.alphazero.benchmark import IterationBenchmark, alternating_replays, module_device
from meeple.phases.alphazero.evaluator import TorchEvaluator
from meeple.tracking import keys
from meeple.viewer.replay import Replay
from meeple_chess.arena import MCTSPlayer, play_match
from meeple_chess.replay import record_game
from meeple_native.chess import NUM_ACTIONS, PLANES_SHAPE, Board


def mate_in_one_positions(count: int, seed: int, max_games: int = 2000) -> list[tuple[Board, list[int]]]:
    """``count`` positions with a mate in one for the side to move, and their mating actions,
    from uniformly random games played from ``seed`` (at most one position per game, so they
    differ). A fixed seed: every run measures on the same positions."""
    rng = np.random.default_rng(seed)
    found: list[tuple[Board, list[int]]] = []
    for _ in range(max_games):
        if len(found) >= count:
            break
        board = Board()
        candidates = []
        while not board.is_game_over():
            mates = []
            for action in board.legal_actions():
                child = board.copy()
                child.push_action(action)
                if child.is_checkmate():
                    mates.append(int(action))
            if mates:
                candidates.append((board.copy(), mates))
            legal = board.legal_actions()
            board.push_action(int(legal[rng.integers(len(legal))]))
        if candidates:
            found.append(candidates[rng.integers(len(candidates))])
    return found


@torch.inference_mode()
def policy_actions(net: torch.nn.Module, boards: list[Board], device: torch.device) -> np.ndarray:
    """The raw policy's most likely legal action on each board."""
    planes = np.zeros((len(boards), *PLANES_SHAPE), np.float32)
    legal = np.zeros((len(boards), NUM_ACTIONS), bool)
    for i, board in enumerate(boards):
        board.encode(planes[i])
        board.legal_mask(legal[i])
    logits, _ = net.eval()(torch.from_numpy(planes).to(device))
    logits = logits.float().cpu().numpy()
    return np.where(legal, logits, -np.inf).argmax(1)


class ChessBenchmark(IterationBenchmark):
    """Every ``every_n_iterations`` (and after the last), measures the best network:

    * ``eval/win_rate_vs_mcts``: MCTS with the network (``agent_simulations``) against pure MCTS
      with random playouts (``meeple_native.chess.MCTS(evaluator="rollout")``,
      ``mcts_opponent_simulations``), ``mcts_games`` games, colours alternating, the first
      ``opening_moves`` plies sampled from the visit counts; also the draw share and the mean
      game length of that match (chess between weak players is mostly draws);
    * ``eval/mate_in_one/policy`` and ``eval/mate_in_one/mcts``: the share of ``mate_positions``
      positions with a mate in one (from random games, fixed ``mate_seed``) where the raw policy's
      top legal move, or MCTS with the network, mates; ``eval/mate_in_one/random`` is the share a
      uniformly random legal move gets (the floor).

    Then ``replays`` games of the same agent against the same pure MCTS, colours alternating, go to
    the viewer (:mod:`meeple_chess.replay`).
    """

    log_label = "chess benchmark"

    def __init__(self, every_n_iterations: int, agent_simulations: int, mcts_games: int,
                 mcts_opponent_simulations: int, opening_moves: int = 4, mate_positions: int = 50,
                 mate_seed: int = 2026, leaves_in_flight: int = 8, replays: int = 0) -> None:
        super().__init__(every_n_iterations, replays)
        self.agent_simulations = agent_simulations
        self.mcts_games = mcts_games
        self.mcts_opponent_simulations = mcts_opponent_simulations
        self.opening_moves = opening_moves
        self.mate_positions = mate_positions
        self.mate_seed = mate_seed
        self.leaves_in_flight = leaves_in_flight
        self.mates: list[tuple[Board, list[int]]] = []
        self._players: tuple[MCTSPlayer, MCTSPlayer | None] | None = None

    def prepare(self) -> None:
        self.mates = mate_in_one_positions(self.mate_positions, self.mate_seed) if self.mate_positions else []

    def evaluate_module(self, pl_module: L.LightningModule) -> dict[str, float]:
        return self.evaluate(pl_module.best, module_device(pl_module))

    def evaluate(self, net: torch.nn.Module, device: torch.device) -> dict[str, float]:
        start = time.perf_counter()
        agent = MCTSPlayer(TorchEvaluator(net, device), num_simulations=self.agent_simulations,
                           leaves_in_flight=self.leaves_in_flight, seed=next(self._seeds))
        metrics: dict[str, float] = {}
        pure = None
        if self.mcts_games:
            pure = MCTSPlayer("rollout", num_simulations=self.mcts_opponent_simulations, leaves_in_flight=1,
                              seed=next(self._seeds))
            report = play_match(agent, pure, self.mcts_games, opening_moves=self.opening_moves)
            metrics[keys.EVAL_VS_MCTS] = report.result.score
            metrics["eval/draw_rate_vs_mcts"] = report.result.draws / report.result.games
            metrics["eval/game_length_vs_mcts"] = float(np.mean(report.plies))
        self._players = agent, pure  # the replays' (no seed drawn for them: the metrics stay as they were)
        if self.mates:
            boards = [board for board, _ in self.mates]
            chosen = policy_actions(net, boards, device)
            metrics["eval/mate_in_one/policy"] = float(np.mean([a in m for a, (_, m) in zip(chosen, self.mates)]))
            metrics["eval/mate_in_one/mcts"] = float(np.mean([agent.move(b) in m for b, m in self.mates]))
            metrics["eval/mate_in_one/random"] = float(np.mean([len(m) / len(b.legal_actions())
                                                                for b, m in self.mates]))
        return self.finish(metrics, start)

    def replay_games(self, pl_module: L.LightningModule, count: int, iteration: int) -> list[Replay]:
        agent, pure = self._players
        if pure is None:  # the evaluation played no match: an opponent of the same strength
            pure = MCTSPlayer("rollout", num_simulations=self.mcts_opponent_simulations, leaves_in_flight=1,
                              seed=iteration)
        return alternating_replays(partial(record_game, opening_moves=self.opening_moves), agent, pure,
                                   f"pure MCTS ({self.mcts_opponent_simulations} rollouts)", count,
                                   f"chess iteration {iteration}")
