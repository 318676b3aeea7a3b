"""Share of optimal moves on Pascal Pons' Connect Four benchmark positions.

Files hold ``<moves> <score>`` lines (1-based columns; see ``../shared/data/README.md``).
Each position's moves are classified by the exact solver once: *optimal* moves reach
the best score, *correct* moves keep the position's win/draw/loss class.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from meeple.errors import MeepleError
from meeple_native import OBS_SHAPE, Connect4, Solver

SETS = ("Test_L3_R1", "Test_L2_R1")  # end game, middle game


@dataclass
class BenchmarkSet:
    name: str
    positions: list[Connect4]
    planes: np.ndarray   # (N, 3, 6, 7) float32
    legal: np.ndarray    # (N, 7) bool
    optimal: np.ndarray  # (N, 7) bool: moves with the best score
    correct: np.ndarray  # (N, 7) bool: moves that keep the win/draw/loss class
    scores: np.ndarray   # (N,) int: the position's score for the side to move (Pons' convention)

    def __len__(self) -> int:
        return len(self.positions)

    def shares(self, moves: np.ndarray) -> tuple[float, float]:
        """(optimal share, correct share) of one chosen column per position, for the first
        ``len(moves)`` positions."""
        rows = np.arange(len(moves))
        return float(self.optimal[rows, moves].mean()), float(self.correct[rows, moves].mean())

    def random_shares(self) -> tuple[float, float]:
        """What a uniformly random legal move scores on average (the floor to beat)."""
        n_legal = self.legal.sum(1)
        return float((self.optimal.sum(1) / n_legal).mean()), float((self.correct.sum(1) / n_legal).mean())


def load_benchmark(path: str | Path, solver: Solver | None = None, limit: int | None = None) -> BenchmarkSet:
    """Parse and solve one benchmark file; errors name the file, the line and the expected form."""
    path = Path(path)
    if not path.is_file():
        raise MeepleError(f"Connect Four benchmark file {path} does not exist (expected one of {', '.join(SETS)} "
                          "from ../shared/data/connect4, see its README)")
    solver = solver or Solver()
    positions, legal, optimal, correct, best_scores = [], [], [], [], []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        try:
            if len(parts) != 2:
                raise ValueError(f"{len(parts)} fields")
            position, score = Connect4.from_moves(parts[0]), int(parts[1])
        except ValueError as err:
            raise MeepleError(f"{path}:{number}: {err}; expected '<moves 1-7> <score>', got {line!r}") from None
        if position.is_terminal():
            raise MeepleError(f"{path}:{number}: the game is already over in {parts[0]!r}")
        scores = solver.analyze(position)
        valid = np.array([s is not None for s in scores])
        values = np.array([s if s is not None else -99 for s in scores])
        best = values[valid].max()
        if best != score:
            raise MeepleError(f"{path}:{number}: the solver scores {parts[0]!r} {best}, the file says {score}")
        positions.append(position)
        best_scores.append(score)
        legal.append(valid)
        optimal.append(valid & (values == best))
        correct.append(valid & (np.sign(values) == np.sign(best)))
        if limit is not None and len(positions) >= limit:
            break
    planes = np.empty((len(positions), *OBS_SHAPE), np.float32)
    for i, position in enumerate(positions):
        position.encode(planes[i])
    return BenchmarkSet(path.name, positions, planes, np.array(legal), np.array(optimal), np.array(correct),
                        np.array(best_scores))


@torch.inference_mode()
def policy_moves(net: torch.nn.Module, bench: BenchmarkSet, device: torch.device | str = "cpu",
                 batch_size: int = 1024) -> np.ndarray:
    """The network's raw policy choice (argmax over legal moves) for every position."""
    was_training = net.training
    net.eval()
    moves = []
    try:
        for start in range(0, len(bench), batch_size):
            x = torch.from_numpy(bench.planes[start : start + batch_size]).to(device)
            logits, _ = net(x)
            legal = torch.from_numpy(bench.legal[start : start + batch_size]).to(device)
            moves.append(logits.float().masked_fill(~legal, float("-inf")).argmax(-1).cpu().numpy())
    finally:
        net.train(was_training)
    return np.concatenate(moves)


def player_moves(player, bench: BenchmarkSet, limit: int | None = None) -> np.ndarray:
    """A player's (e.g. MCTS with the network) greedy choice on the first ``limit`` positions."""
    return np.array([player.move(p) for p in bench.positions[:limit]])
