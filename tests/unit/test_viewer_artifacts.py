"""Replay pages of an evaluation: in the run directory's replays/phase<N>/ and the run's MLflow
artifacts, on rank 0 only, and never an exception out of a failed save."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from lightning.pytorch.loggers import MLFlowLogger

from meeple.checkpoint.callback import RolloutCheckpoint
from meeple.checkpoint.run_dir import RunDirectory
from meeple.viewer import artifacts, page
from meeple.viewer.page import read_replay
from meeple.viewer.renderers import Renderer
from meeple.viewer.replay import Replay, Step

TOY = Renderer("toy", "/* toy */")
REPLAY = Replay("toy", "Iteration 2: agent vs bot", ["agent", "bot"], [Step({"n": 0}, action="a"), Step({"n": 1})])


class FakeMLflow(MLFlowLogger):
    """An MLFlowLogger that records log_artifact calls instead of talking to a server."""

    def __init__(self) -> None:
        self.logged: list[tuple[str, str, str]] = []

    @property
    def run_id(self) -> str:
        return "run-1"

    @property
    def experiment(self):
        return SimpleNamespace(log_artifact=lambda run_id, path, sub: self.logged.append((run_id, path, sub)))


def trainer(callbacks, loggers, rank: int = 0):
    return SimpleNamespace(callbacks=callbacks, loggers=loggers, global_rank=rank)


@pytest.fixture
def toy_renderer(monkeypatch):
    monkeypatch.setattr(page, "renderer", lambda game: TOY)


def test_pages_go_to_the_run_directory_and_mlflow(tmp_path, toy_renderer):
    run = RunDirectory(path=tmp_path / "run", run_id="r", master_seed=1, experiment="e", task="t")
    mlflow = FakeMLflow()
    paths = artifacts.publish_replays(trainer([RolloutCheckpoint(run, phase=2)], [mlflow]), [REPLAY, REPLAY])
    assert paths == [tmp_path / "run/replays/phase2/0-iteration-2-agent-vs-bot.html",
                     tmp_path / "run/replays/phase2/1-iteration-2-agent-vs-bot.html"]
    assert read_replay(paths[0]) == REPLAY
    assert mlflow.logged == [("run-1", str(p), "replays/phase2") for p in paths]
    assert artifacts.publish_replays(trainer([RolloutCheckpoint(run, phase=2)], [mlflow], rank=1), [REPLAY]) == []


def test_without_a_run_directory_pages_still_reach_mlflow(toy_renderer):
    mlflow = FakeMLflow()
    assert artifacts.publish_replays(trainer([], [mlflow]), [REPLAY]) == []
    assert [(sub, path.rsplit("/", 1)[-1]) for _, path, sub in mlflow.logged] == [
        ("replays", "0-iteration-2-agent-vs-bot.html")]


def test_a_failed_save_is_a_warning(tmp_path, caplog):
    run = RunDirectory(path=tmp_path / "run", run_id="r", master_seed=1, experiment="e", task="t")
    # no renderer is installed for "toy": the page cannot be built
    assert artifacts.publish_replays(trainer([RolloutCheckpoint(run, phase=0)], []), [REPLAY]) == []
    assert "replays not saved: no viewer renderer for game 'toy'" in caplog.text

