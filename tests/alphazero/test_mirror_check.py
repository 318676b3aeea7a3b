"""``phase.augment_mirror`` is accepted only for a game that declares ``mirror_symmetric``."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import meeple.phases.alphazero.schema as schema
from meeple.errors import ConfigError
from meeple.phases.alphazero.schema import AlphaZeroPhase, check_alphazero


def _phase(augment_mirror: bool) -> AlphaZeroPhase:
    return AlphaZeroPhase(name="alphazero", module=None, optimizer=None, game="board", iterations=1,
                          games_per_iteration=1, train_steps=1, batch_size=1, replay_size=10, min_replay=0,
                          augment_mirror=augment_mirror, lr=1e-3, weight_decay=0.0, value_coef=1.0,
                          max_grad_norm=None, selfplay={})  # fmt: skip


@pytest.mark.parametrize("declared, allowed", [(None, False), (False, False), (True, True)])
def test_mirror_needs_a_game_that_declares_symmetry(monkeypatch, declared, allowed):
    game = SimpleNamespace(selfplay_options=frozenset())
    if declared is not None:
        game.mirror_symmetric = declared
    monkeypatch.setattr(schema, "installed_games", lambda: ["board"])
    monkeypatch.setattr(schema, "load_game", lambda name: game)
    check_alphazero(None, _phase(False))  # never mirrored: always fine
    if allowed:
        check_alphazero(None, _phase(True))
    else:
        with pytest.raises(ConfigError, match=r"^phase.augment_mirror=True is not allowed; accepted: false "
                                              r"\(game 'board' declares no left-right symmetry\)$"):  # fmt: skip
            check_alphazero(None, _phase(True))
