"""Connect Four replays: one recorded game (boards, decisions from the search), its page through
the declared ``meeple.viewers`` entry point, and a debug run's replay pages."""

from __future__ import annotations

import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

import meeple.plugins.registry as registry
from meeple.viewer.page import read_replay, replay_html
from meeple.viewer.renderers import renderer
from meeple_connect4.arena import MCTSPlayer, RandomPlayer
from meeple_connect4.replay import record_game

PYPROJECT = Path(__file__).parents[1] / "pyproject.toml"
TINY = ["+experiment=connect4_alphazero", "debug=tiny", "callbacks.progress=null",
        "phase.callbacks.curves=null", "phase.eval.replays=2", "phase.eval.mcts_positions=0",
        "phase.eval.solver_games=0", "phase.callbacks.benchmark.generated_positions=50",
        "phase.iterations=1"]


@pytest.fixture
def declared_viewer(monkeypatch):
    """The registry sees this plugin's declared viewer (the installed metadata may be older)."""
    table = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"][registry.VIEWERS_GROUP]
    eps = [EntryPoint(name, value, registry.VIEWERS_GROUP) for name, value in table.items()]
    real = registry.entry_points
    monkeypatch.setattr(registry, "entry_points",
                        lambda group: eps if group == registry.VIEWERS_GROUP else real(group=group))


def test_a_recorded_game_has_every_board_and_the_searchs_decisions(declared_viewer):
    search = MCTSPlayer("rollout", num_simulations=20, leaves_in_flight=1, seed=1)
    replay = record_game((search, RandomPlayer(seed=2)), ("mcts", "random"), "a game", opening_moves=2)
    moves = replay.result["moves"]
    assert len(replay.steps) == moves + 1 and replay.steps[-1].action is None
    for ply, step in enumerate(replay.steps):
        stones = [v for row in step.state["cells"] for v in row if v]
        assert len(stones) == ply and stones.count(1) - stones.count(2) in (0, 1)
    searched = [s for s in replay.steps[:-1] if s.actor == 0]
    assert all(s.decision is not None for s in searched)
    assert all(s.decision is None for s in replay.steps[:-1] if s.actor == 1)  # the random player does not search
    first = searched[0].decision
    assert sum(c.visits for c in first.top) == 20 and sum(c.p for c in first.top) == pytest.approx(1.0)
    assert [c.visits for c in first.top] == sorted((c.visits for c in first.top), reverse=True)
    assert {c.action for c in first.top} <= set("1234567") and first.value is not None
    assert replay.steps[-1].marks in (["win"], ["draw"])
    page = replay_html(replay)
    assert renderer("connect4").js in page and "window.meepleRenderers.connect4" in page


def test_a_debug_run_leaves_replay_pages_in_the_run_and_mlflow(tmp_path, monkeypatch, declared_viewer):
    import mlflow

    from meeple.cli.train import train
    from meeple.config.compose import compose_config

    monkeypatch.chdir(tmp_path)  # outputs/ and mlflow.db land there
    train(compose_config(TINY))
    (run,) = Path("outputs/runs").iterdir()
    pages = sorted((run / "replays" / "phase0").glob("*.html"))
    assert len(pages) == 2, pages  # phase.eval.replays after the one iteration's measurement
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/outputs/mlflow.db")
    (tracked,) = client.search_runs([client.get_experiment_by_name("connect4_alphazero").experiment_id])
    logged = [Path(a.path).name for a in client.list_artifacts(tracked.info.run_id, "replays/phase0")]
    assert logged == [p.name for p in pages]
    assert pages[0].name == "0-connect4-iteration-1-game-1-agent-vs-pure-mcts-16-rollouts.html"
    for page in pages:
        replay = read_replay(page)
        assert len(replay.steps) == replay.result["moves"] + 1
        assert "agent" in replay.players and sum(s.decision is not None for s in replay.steps) >= replay.result["moves"] // 2
