"""Typed schema of conf/phase/alphazero.yaml and its cross-field checks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig

from meeple.config.schema import require
from meeple.errors import ConfigError
from meeple.plugins.registry import installed_games, load_game


@dataclass
class AZGate:
    games: int = 20
    threshold: float = 0.55
    num_simulations: int = 64
    opening_moves: int = 4


@dataclass
class AZEval:
    every_n_iterations: int = 1
    agent_simulations: int = 64
    mcts_games: int = 10
    mcts_opponent_simulations: int = 200
    solver_games: int = 10
    mcts_positions: int = 100
    benchmark_dir: str | None = None
    replays: int = 1  # games kept as viewer pages after each measurement (0: none); docs/viewer.md


@dataclass
class AlphaZeroPhase:
    name: str
    module: Any
    optimizer: Any
    game: str | None  # null in conf/phase/alphazero.yaml: a game's recipe names it
    iterations: int
    games_per_iteration: int
    train_steps: int
    batch_size: int
    replay_size: int
    min_replay: int
    augment_mirror: bool
    lr: float
    weight_decay: float
    value_coef: float
    max_grad_norm: float | None
    selfplay: dict[str, Any]
    gate: AZGate = field(default_factory=AZGate)
    eval: AZEval = field(default_factory=AZEval)


def check_alphazero(cfg: DictConfig, phase: AlphaZeroPhase) -> None:
    # Entry-point metadata names the games; only a known game's (torch-free) module is loaded.
    games = installed_games()
    require(phase.game in games, "phase.game", phase.game,
            ", ".join(games) or "none installed (pip install -e plugins/<game>)")
    for name in ("iterations", "games_per_iteration", "train_steps", "batch_size", "replay_size"):
        require(getattr(phase, name) >= 1, f"phase.{name}", getattr(phase, name), "an integer >= 1")
    require(0 <= phase.min_replay <= phase.replay_size, "phase.min_replay", phase.min_replay,
             f"an integer in [0, phase.replay_size={phase.replay_size}]")
    require(phase.lr > 0, "phase.lr", phase.lr, "a float > 0")
    require(phase.weight_decay >= 0, "phase.weight_decay", phase.weight_decay, "a float >= 0")
    require(phase.max_grad_norm is None or phase.max_grad_norm > 0, "phase.max_grad_norm",
             phase.max_grad_norm, "null or a float > 0")
    require(phase.gate.games >= 0, "phase.gate.games", phase.gate.games, "an integer >= 0 (0: accept every candidate)")
    require(0 < phase.gate.threshold <= 1, "phase.gate.threshold", phase.gate.threshold, "a float in (0, 1]")
    require(phase.gate.num_simulations >= 1, "phase.gate.num_simulations", phase.gate.num_simulations,
             "an integer >= 1")
    require(phase.eval.every_n_iterations >= 1, "phase.eval.every_n_iterations", phase.eval.every_n_iterations,
             "an integer >= 1")
    require(phase.eval.replays >= 0, "phase.eval.replays", phase.eval.replays, "an integer >= 0 (0: no replays)")
    game = load_game(phase.game)
    # Mirrored samples are only valid for a game that says it is left-right symmetric with
    # actions that mirror with the board (columns); never flip silently.
    require(not phase.augment_mirror or getattr(game, "mirror_symmetric", False), "phase.augment_mirror",
            phase.augment_mirror, f"false (game {phase.game!r} declares no left-right symmetry)")
    accepted = game.selfplay_options
    unknown = sorted(set(phase.selfplay) - accepted)
    if unknown:
        raise ConfigError(f"phase.selfplay.{unknown[0]} is not a self-play engine option; accepted: "
                          f"{', '.join(sorted(accepted))}")

