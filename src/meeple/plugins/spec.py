"""What a plugin provides to the core.

A plugin is an installable package that declares entry points: in the group
``meeple.plugins`` an env backend (the entry point's name is the backend name used in
``env.backend``, its value an object satisfying :class:`EnvBackend`), in ``meeple.games`` a
game for the AlphaZero phase (:class:`AlphaZeroGame`, named by ``phase.game``) and in
``meeple.benchmarks`` a benchmark's ``main(argv)`` (``python -m meeple.bench``).
Its Hydra configs live in ``<package>/conf/`` (found by the search-path plugin,
so the core never imports plugin code to compose a config).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # env servers load backends without importing torch
    from torchrl.envs import EnvBase


@runtime_checkable
class EnvBackend(Protocol):
    """A factory of TorchRL environments for one backend.

    ``make_env`` returns an env whose batch size is ``(num_envs,)`` and that
    steps all of them in one call (per-step overhead is paid per batch).
    Discrete actions are integer indices (``Categorical`` spec); an ``action_mask``
    observation (bool, one per action) makes the core's policies masked. The core adds
    episode bookkeeping transforms and seeds the env; the backend must not. A backend whose
    batches come in groups may define ``batch_unit(env_cfg) -> int``: every ``num_envs`` it
    is given is then a multiple of it (``meeple.env_factory.batch_unit``).
    """

    name: str

    def make_env(self, env_cfg: Mapping[str, Any], *, num_envs: int, device: str = "cpu") -> EnvBase:
        ...


@runtime_checkable
class EnvSnapshots(Protocol):
    """Optional: a backend whose envs' simulator state can be saved and restored exactly.

    Checkpoints use it for exact resume: the collector's in-flight episodes continue
    where they stood. ``env`` is what the backend's ``make_env`` returned (not the core's
    transformed wrapper). The state must be built from tensors, Python scalars, strings,
    None, lists, tuples and dicts (checkpoints load with ``torch.load(weights_only=True)``).
    A backend without it still resumes, but its envs restart from fresh episodes.
    ``get_sim_state`` may raise :class:`SnapshotUnsupported` for envs it cannot capture.
    """

    def get_sim_state(self, env: EnvBase) -> dict[str, Any]:
        ...

    def set_sim_state(self, env: EnvBase, state: dict[str, Any]) -> None:
        ...


class SnapshotUnsupported(NotImplementedError):
    """This env's simulator state cannot be captured exactly (resume restarts its episodes)."""


@dataclass(frozen=True)
class MatchResult:
    """A match's games from the first player's side (win 1, draw 0.5, loss 0)."""

    wins: int
    draws: int
    losses: int

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def score(self) -> float:
        """Win 1, draw 0.5, loss 0, averaged over the games (the "win rate" of a gate)."""
        return (self.wins + 0.5 * self.draws) / max(self.games, 1)


class SelfPlayEngine(Protocol):
    """Plays self-play games with MCTS and the evaluator it was made with.

    ``run(games)`` plays that many games and returns one sample per position as arrays
    ``planes`` (N, *planes_shape) float32, ``policy`` (N, num_actions) the search's policy target
    (visit distribution, or the Gumbel improved policy), ``value`` (N,) game result from the
    mover's view and ``legal`` (N, num_actions) bool, optionally ``full`` (N,) bool (False for a
    fast search's position, which is not trained on), plus per game ``moves`` and ``winner``
    (-1 draw) and the engine's ``metrics`` dict. ``next_game_id`` (read and write) numbers the
    next game, whose random stream derives from the seed and that id: restoring it resumes
    self-play exactly.
    """

    next_game_id: int

    def run(self, games: int) -> dict[str, Any]:
        ...

    def close(self) -> None:
        ...


@runtime_checkable
class AlphaZeroGame(Protocol):
    """A two-player game the AlphaZero phase can learn (entry point group ``meeple.games``; the
    name is ``phase.game``).

    An evaluator is the callable native search calls with a batch of ``planes`` and ``legal``
    masks and that returns (policy logits, values) as arrays
    (``meeple.phases.alphazero.evaluator.TorchEvaluator``). The entry point's module must import
    without torch: config validation loads it to check ``phase.selfplay`` against
    ``selfplay_options``.

    Optional attribute ``mirror_symmetric: bool`` (absent = False): the game is left-right
    symmetric and a mirrored position's actions are the mirrored actions (planes and policy
    flipped along the last axis), so ``phase.augment_mirror`` may store mirrored samples; the
    phase refuses ``augment_mirror: true`` for any other game.
    """

    name: str
    planes_shape: tuple[int, ...]  # one position's network input (C, H, W)
    num_actions: int
    selfplay_options: frozenset[str]  # keyword options of selfplay_engine a config may set

    def selfplay_engine(self, evaluator: Any, *, seed: int, planes_buffers: Any,
                        **options: Any) -> SelfPlayEngine:
        """The self-play engine; ``planes_buffers`` are host buffers it may encode into."""
        ...

    def mcts_player(self, evaluator: Any, *, num_simulations: int, leaves_in_flight: int,
                    seed: int) -> Any:
        """A player that searches with the evaluator (no exploration noise); the gate's players."""
        ...

    def play_match(self, player: Any, opponent: Any, games: int, *,
                   opening_moves: int) -> MatchResult:
        """``games`` games with colours alternating, ``player`` first in the even-numbered ones;
        the first ``opening_moves`` plies of each game are sampled from the search's visit counts
        so that deterministic players do not replay one game."""
        ...
