"""DuplicateEvaluation's replays: the duplicate's own games, replayed with their MJAI stream and
saved as pages in the run directory, each decision of the policy annotated."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

import meeple.viewer.artifacts as artifacts
from meeple.nets.planes import build_planes_actor_critic
from meeple.viewer.page import read_replay
from meeple.viewer.renderers import installed_viewers
from meeple_mahjong import duplicate as dup
from meeple_mahjong.evaluation import DuplicateEvaluation
from meeple_mahjong.policy import PolicyTable, greedy_policy
from meeple_mahjong.specs import action_spec, observation_spec
from meeple_mahjong.viewer import renderer


@pytest.fixture(scope="module")
def nets():
    # One decision at a time: on a shared CPU, torch's intra-op threads cost ~25x per tiny forward.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(1)
    yield build_planes_actor_critic(observation_spec(1, oracle=False), action_spec(1), channels=8, blocks=1,
                                    hidden=16, shared=True)  # fmt: skip
    torch.set_num_threads(threads)


@pytest.fixture
def run_dir(tmp_path, monkeypatch):
    """The replays' folder of a run (what the checkpoint callback names in a real run); the
    installed plugin metadata may predate the ``meeple.viewers`` entry point."""
    folder = tmp_path / "replays" / "phase0"
    monkeypatch.setattr(artifacts, "run_replay_dir", lambda trainer: (folder, "replays/phase0"))
    if "mahjong" not in installed_viewers():
        monkeypatch.setattr("meeple.viewer.page.renderer", lambda game: renderer())
    return folder


def test_each_evaluation_saves_its_games_as_annotated_pages(nets, run_dir):
    actor, critic = nets
    cb = DuplicateEvaluation(games=1, opponent="rule", seed=3, first_game=5, replays=2)
    trainer = SimpleNamespace(global_step=12, global_rank=0, loggers=[], callbacks=[])
    actor.train()
    paths = cb.save_replays(trainer, SimpleNamespace(policy=actor, critic=critic))
    assert actor.training and critic.training  # modes restored
    assert [p.parent for p in paths] == [run_dir, run_dir] and len(set(paths)) == 2
    first, second = (read_replay(p) for p in paths)
    assert first.meta["seats"] == [0] and second.meta["seats"] == [1]
    assert first.players == ["policy", "rule 1", "rule 2", "rule 3"] and "step 12" in first.title
    # The network played greedily and reviews itself: its top action is always the one played.
    stats = first.meta["agreement"]["all"]
    assert stats["decisions"] > 20 and stats["agree"] == stats["decisions"]
    assert all(s.decision.value is not None for s in first.steps if s.decision)
    # The very game the duplicate played at that index with the policy in seat 0.
    ((seat, job),) = [(s, j) for s, j in dup.rotations(3, 5, "policy", "rule") if s == 0]
    (results,) = PolicyTable(greedy_policy(actor)).play([job])
    assert first.result["scores"] == [r.score for r in results]


def test_replays_zero_keeps_none_and_a_bad_count_is_refused(nets, run_dir):
    actor, critic = nets
    cb = DuplicateEvaluation(games=1, seed=3, replays=0)
    module = SimpleNamespace(policy=actor, critic=critic, log=lambda *a, **k: None)
    trainer = SimpleNamespace(global_step=1, global_rank=0, loggers=[], callbacks=[], current_epoch=0,
                              max_epochs=1, should_stop=True)  # fmt: skip
    cb.on_train_epoch_end(trainer, module)
    assert len(cb.history) == 1 and not run_dir.exists()
    with pytest.raises(ValueError, match=r"replays=-1; accepted: an integer >= 0"):
        DuplicateEvaluation(games=1, replays=-1)
