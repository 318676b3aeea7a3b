"""AlphaZero learns: after a few iterations the network beats its own initial weights."""

import copy

import lightning as L
import pytest
from hydra.utils import instantiate

from meeple.cli.train import build_run
from meeple.phases.alphazero.evaluator import TorchEvaluator
from meeple_connect4.arena import MCTSPlayer, play_match

SMALL = [
    "+experiment=connect4_alphazero", "seed=5", "tracking=none", "checkpoint=none", "callbacks.progress=null",
    "phase.callbacks.benchmark=null", "phase.callbacks.curves=null", "phase.iterations=2", "phase.games_per_iteration=160",
    "phase.train_steps=300", "phase.min_replay=0", "phase.selfplay.num_simulations=48", "phase.gate.games=0",
]


@pytest.mark.slow
def test_trained_network_beats_its_initial_weights(compose, in_tmp):
    parts = build_run(compose(SMALL))
    initial = copy.deepcopy(parts.module.net).eval()
    trainer = instantiate(compose(SMALL).trainer, logger=False, **parts.trainer_kwargs)
    trainer.fit(parts.module, datamodule=parts.datamodule)
    module = parts.module
    assert module.generation == 2  # gate.games=0 accepts every candidate
    assert trainer.callback_metrics["selfplay/games"] == 2 * 160
    trained = MCTSPlayer(TorchEvaluator(module.best), num_simulations=32, seed=1)
    before = MCTSPlayer(TorchEvaluator(initial), num_simulations=32, seed=2)
    # 40 games: the self-play threads make runs differ, so the margin must hold across runs.
    result = play_match(trained, before, games=40, opening_moves=4)
    assert result.score >= 0.6, result
    assert isinstance(trainer, L.Trainer)
