"""The AlphaZero gate plays through the game protocol (``meeple.plugins.spec.AlphaZeroGame``), and
the phase finds games through entry points (``meeple.games``) with a clear error for unknown ones."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from types import SimpleNamespace

import pytest
from torch import nn

import meeple.plugins.registry as registry
from meeple.errors import PluginNotFoundError
from meeple.phases.alphazero.callbacks import AlphaZeroGate
from meeple.phases.alphazero.evaluator import TorchEvaluator
from meeple.plugins.spec import AlphaZeroGame, MatchResult
from meeple.seeding import Component, PhaseSeeds, SeedStreams


class ScriptedGame:
    """Records what the gate asks for; every match ends with ``result``."""

    name = "scripted"
    planes_shape = (1, 2, 2)
    num_actions = 2
    selfplay_options = frozenset()

    def __init__(self, result: MatchResult) -> None:
        self.result = result
        self.players: list[dict] = []
        self.matches: list[tuple] = []

    def selfplay_engine(self, evaluator, *, seed, planes_buffers, **options):
        raise AssertionError("the gate plays no self-play")

    def mcts_player(self, evaluator, *, num_simulations, leaves_in_flight, seed):
        self.players.append(dict(evaluator=evaluator, num_simulations=num_simulations,
                                 leaves_in_flight=leaves_in_flight, seed=seed))  # fmt: skip
        return len(self.players) - 1

    def play_match(self, player, opponent, games, *, opening_moves):
        self.matches.append((player, opponent, games, opening_moves))
        return self.result


class DataModule(SeedStreams):
    """The gate draws its players' seeds from the datamodule's (checkpointed) stream."""

    def __init__(self, seeds: PhaseSeeds) -> None:
        self.seeds = seeds


class Trainer:
    world_size, global_rank = 1, 0

    def __init__(self, seeds: PhaseSeeds) -> None:
        self.datamodule = DataModule(seeds)


class RankOneTrainer(Trainer):
    """Rank 1 of two: what rank 0 broadcasts is ``rank0``."""

    world_size, global_rank = 2, 1

    def __init__(self, seeds: PhaseSeeds, rank0) -> None:
        super().__init__(seeds)
        self.strategy = SimpleNamespace(broadcast=lambda value, src: rank0)


class Module:
    """The parts of ``AlphaZeroModule`` the gate touches."""

    def __init__(self, world_size: int = 1) -> None:
        self.net, self.best = nn.Linear(2, 2), nn.Linear(2, 2)
        self.trainer = SimpleNamespace(world_size=world_size)
        self.generation = 0
        self.logged: dict[str, float] = {}

    def promote(self) -> None:
        self.generation += 1

    def log(self, key, value, **_) -> None:
        self.logged[key] = value


@pytest.mark.parametrize("result, accepted", [(MatchResult(3, 1, 0), True), (MatchResult(1, 1, 2), False)])
def test_gate_plays_candidate_against_best_through_the_game(result, accepted):
    game = ScriptedGame(result)
    assert isinstance(game, AlphaZeroGame)
    seeds = PhaseSeeds(11, 0)
    gate = AlphaZeroGate(game, games=4, threshold=0.55, num_simulations=9, opening_moves=3,
                         leaves_in_flight=2)  # fmt: skip
    module = Module()
    gate.on_train_epoch_end(Trainer(seeds), module)
    candidate, best = game.players
    assert isinstance(candidate["evaluator"], TorchEvaluator) and candidate["evaluator"].net is module.net
    assert best["evaluator"].net is module.best
    stream = seeds.stream(Component.OPPONENT)
    assert [candidate["seed"], best["seed"]] == [next(stream), next(stream)]
    assert candidate["num_simulations"] == best["num_simulations"] == 9 and best["leaves_in_flight"] == 2
    assert game.matches == [(0, 1, 4, 3)]  # candidate first, as the match's "player"
    assert module.generation == int(accepted) and gate.last_score == result.score
    assert module.logged["gate/score"] == result.score
    assert module.logged["gate/accepted"] == float(accepted)
    assert module.logged["gate/generation"] == float(accepted) and "perf/gate_s" in module.logged


def test_gate_with_no_games_accepts_without_playing():
    game = ScriptedGame(MatchResult(0, 0, 1))
    module = Module()
    AlphaZeroGate(game, games=0, threshold=0.9, num_simulations=1,
                  opening_moves=0).on_train_epoch_end(None, module)  # fmt: skip
    assert game.players == [] and module.generation == 1 and module.logged["gate/score"] == 1.0


def test_on_rank_one_the_gate_takes_rank_zeros_match():
    """Several learner processes: rank 0 plays the match; rank 1 plays none and promotes (or
    not) from rank 0's broadcast score, so every rank keeps the same best network."""
    game = ScriptedGame(MatchResult(0, 4, 0))  # what rank 1 would score on its own: rejected
    module = Module(world_size=2)
    gate = AlphaZeroGate(game, games=4, threshold=0.55, num_simulations=9, opening_moves=3)
    gate.on_train_epoch_end(RankOneTrainer(PhaseSeeds(11, 0, rank=1), rank0=(0.75, 2.0)), module)
    assert game.players == [] and game.matches == []
    assert module.generation == 1 and module.logged["gate/score"] == 0.75 and module.logged["perf/gate_s"] == 2.0


@pytest.fixture
def games(monkeypatch, tmp_path):
    (tmp_path / "fake_games_plugin.py").write_text("from types import SimpleNamespace\nnot_a_game = SimpleNamespace(name='x')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    eps = [EntryPoint("b_game", "fake_games_plugin:not_a_game", registry.GAMES_GROUP),
           EntryPoint("a_game", "fake_games_plugin:not_a_game", registry.GAMES_GROUP)]
    real = registry.entry_points
    monkeypatch.setattr(registry, "entry_points", lambda group: eps
                        if group == registry.GAMES_GROUP else real(group=group))  # fmt: skip
    registry.load_game.cache_clear()
    yield
    registry.load_game.cache_clear()


def test_unknown_game_lists_the_installed_ones(games):
    assert registry.installed_games() == ["a_game", "b_game"]
    with pytest.raises(PluginNotFoundError, match=r"phase.game='chess' is not an installed game; installed: a_game, b_game"):
        registry.load_game("chess")


def test_an_entry_point_that_is_no_game_is_a_clear_error(games):
    with pytest.raises(PluginNotFoundError, match=r"'fake_games_plugin:not_a_game' for game 'a_game' does not provide"):
        registry.load_game("a_game")
