"""The duplicate-evaluation callback: its metrics, its baseline and when it runs."""

from types import SimpleNamespace

import pytest

from meeple.nets.planes import build_planes_actor_critic
from meeple_mahjong import duplicate as dup
from meeple_mahjong import tables
from meeple_mahjong.batch_env import MahjongEnv
from meeple_mahjong.evaluation import RANK_POINTS, DuplicateEvaluation, duplicate_metrics
from meeple_mahjong.policy import PolicyTable, greedy_policy


def test_bots_against_copies_of_themselves_rank_exactly_two_and_a_half():
    stats = dup.run_duplicate(tables.BotTable(), "rule", "rule", 3, seed=5)
    metrics = duplicate_metrics(stats)
    assert metrics["avg_rank"] == 2.5 and metrics["games"] == 3
    assert metrics["rank_points"] == pytest.approx(sum(RANK_POINTS) / 4)  # every place once per index
    assert metrics["avg_rank_ci_low"] == metrics["avg_rank_ci_high"] == 2.5


def test_random_play_ranks_worse_than_the_rule_bots():
    stats = dup.run_duplicate(tables.BotTable(), "random", "rule", 4, seed=0)
    metrics = duplicate_metrics(stats)
    assert metrics["avg_rank"] > 3.0 and metrics["rank_points"] < 0
    assert metrics["avg_rank_ci_low"] <= metrics["avg_rank"] <= metrics["avg_rank_ci_high"]


class _Trainer(SimpleNamespace):
    loggers: list = []


class _Module(SimpleNamespace):
    def log(self, key, value, **_):
        self.logged[key] = value


@pytest.fixture(scope="module")
def actor():
    env = MahjongEnv(num_envs=1)
    actor, _ = build_planes_actor_critic(env.observation_spec, env.action_spec, channels=8, blocks=1,
                                         hidden=16, shared=True)
    env.close()
    return actor


def test_callback_plays_the_greedy_policy_and_logs_baseline_and_evaluations(actor):
    cb = DuplicateEvaluation(games=2, opponent="rule", seed=3, every_n_epochs=2, replays=0)  # replays: test_evaluation_replays
    module = _Module(policy=actor, logged={})
    logged_at_start = []
    trainer = _Trainer(global_step=0, current_epoch=0, max_epochs=3, should_stop=False,
                       loggers=[SimpleNamespace(log_metrics=lambda m, step: logged_at_start.append((step, m)))])
    actor.train()
    cb.on_train_start(trainer, module)
    assert actor.training  # evaluation leaves the mode as it found it
    ((step, baseline),) = logged_at_start
    assert step == 0 and 1.0 <= baseline["eval/untrained_avg_rank"] <= 4.0
    # The same numbers as playing the greedy policy through PolicyTable by hand.
    expected = duplicate_metrics(dup.run_duplicate(PolicyTable(greedy_policy(actor)), "policy", "rule", 2, 3))
    assert baseline["eval/untrained_avg_rank"] == expected["avg_rank"]

    cb.on_train_epoch_end(trainer, module)  # epoch 1 of 3: not due (every 2)
    assert module.logged == {}
    trainer.current_epoch = 1
    cb.on_train_epoch_end(trainer, module)
    assert module.logged["eval/avg_rank"] == expected["avg_rank"]  # weights unchanged
    assert module.logged["eval/untrained_avg_rank"] == expected["avg_rank"]
    assert {"eval/rank_points", "eval/deal_in_rate", "eval/avg_rank_ci_high"} <= set(module.logged)

    restored = DuplicateEvaluation(games=2)
    restored.load_state_dict(cb.state_dict())
    assert restored.untrained == cb.untrained and len(restored.history) == 2


@pytest.mark.parametrize("kwargs, message", [
    ({"games": 0}, r"games=0; accepted: an integer >= 1"),
    ({"games": 1, "opponent": "tsumogiri"}, r"unknown duplicate evaluation opponent 'tsumogiri'; accepted: "),
    ({"games": 1, "every_n_epochs": 0}, r"every_n_epochs=0"),
])
def test_bad_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DuplicateEvaluation(**kwargs)
