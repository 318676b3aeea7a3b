"""Share of optimal moves on Connect Four benchmark positions.

Two sources, labelled the same way by meeple's exact solver (:func:`label_moves`): *optimal*
moves reach the best score, *correct* moves keep the position's win/draw/loss class.

* Generated sets (the default, no outside data): :func:`generate_benchmark` plays uniformly
  random legal moves from a fixed seed to a ply in the set's range and keeps positions that
  are not decided trivially (see :func:`is_trivial`).
* Pascal Pons' published sets as an outside check: files of ``<moves> <score>`` lines
  (1-based columns, from the author's solver write-up), where the solver must agree with
  the file's score.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from meeple.errors import MeepleError
from meeple_native import OBS_SHAPE, WIDTH, Connect4, Solver

SETS = ("Test_L3_R1", "Test_L2_R1")  # Pons' files: end game, middle game


@dataclass(frozen=True)
class GeneratedSet:
    """A generated set: positions with ``plies`` stones (inclusive range) on the board."""

    name: str
    plies: tuple[int, int]


# Pons' split: middle game 15-28 stones, end game more (his sets are also "easy": the game
# ends soon with best play; random play gives a wider spread).
GENERATED = (GeneratedSet("generated_end", (29, 40)), GeneratedSet("generated_middle", (15, 28)))
MIDDLE = "generated_middle"  # the set the solver games start from


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


def label_moves(solver: Solver, position: Connect4) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(legal, optimal, correct, best score) of a non-terminal position, by the exact solver."""
    scores = solver.analyze(position)
    legal = np.array([s is not None for s in scores])
    values = np.array([s if s is not None else -99 for s in scores])
    best = int(values[legal].max())
    return legal, legal & (values == best), legal & (np.sign(values) == np.sign(best)), best


def is_trivial(position: Connect4, optimal: np.ndarray) -> bool:
    """A position that measures nothing: the side to move wins at once (one-ply lookahead finds
    it), or every legal move is optimal (no choice can be wrong)."""
    legal = position.legal_moves()
    return any(position.is_winning_move(c) for c in legal) or bool(optimal[legal].all())


def _benchmark_set(name: str, positions: list[Connect4], labels: list[tuple]) -> BenchmarkSet:
    planes = np.empty((len(positions), *OBS_SHAPE), np.float32)
    for i, position in enumerate(positions):
        position.encode(planes[i])
    columns = list(zip(*labels)) or [(), (), (), ()]  # legal, optimal, correct, best
    legal, optimal, correct = (np.array(c, dtype=bool).reshape(-1, WIDTH) for c in columns[:3])
    return BenchmarkSet(name, positions, planes, legal, optimal, correct, np.array(columns[3], dtype=int))


def generate_benchmark(spec: GeneratedSet, count: int, seed: int, solver: Solver | None = None) -> BenchmarkSet:
    """``count`` distinct, non-trivial positions of ``spec``'s ply range from random legal play,
    labelled by the solver. The same (spec, count, seed) gives the same set on every machine."""
    if count < 1:
        raise MeepleError(f"generated benchmark positions = {count}; accepted: an integer >= 1")
    lo, hi = spec.plies
    solver = solver or Solver()
    rng = np.random.default_rng([seed, lo, hi])  # one stream per set
    positions, labels, seen = [], [], set()
    tries = 0
    while len(positions) < count:
        tries += 1
        if tries > 100 * count:  # cannot happen for the ranges above; guards a bad spec
            raise MeepleError(f"{spec.name}: only {len(positions)} of {count} positions after {tries} games")
        position = Connect4()
        for _ in range(int(rng.integers(lo, hi + 1))):
            position.play(int(rng.choice(position.legal_moves())))
            if position.is_terminal():
                break
        if position.is_terminal() or position.key() in seen:
            continue
        seen.add(position.key())
        label = label_moves(solver, position)
        if is_trivial(position, label[1]):
            continue
        positions.append(position)
        labels.append(label)
    return _benchmark_set(spec.name, positions, labels)


def generated_benchmarks(count: int, seed: int, solver: Solver | None = None) -> list[BenchmarkSet]:
    """Every set of :data:`GENERATED`."""
    solver = solver or Solver()
    return [generate_benchmark(spec, count, seed, solver) for spec in GENERATED]


def load_benchmark(path: str | Path, solver: Solver | None = None, limit: int | None = None) -> BenchmarkSet:
    """Parse and solve one of Pons' files; errors name the file, the line and the expected form."""
    path = Path(path)
    if not path.is_file():
        raise MeepleError(f"Connect Four benchmark file {path} does not exist (expected Pons' {', '.join(SETS)}; "
                          "phase.eval.benchmark_dir=null uses meeple's generated sets only)")
    solver = solver or Solver()
    positions, labels = [], []
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
        label = label_moves(solver, position)
        if label[3] != score:
            raise MeepleError(f"{path}:{number}: the solver scores {parts[0]!r} {label[3]}, the file says {score}")
        positions.append(position)
        labels.append(label)
        if limit is not None and len(positions) >= limit:
            break
    return _benchmark_set(path.name, positions, labels)


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
