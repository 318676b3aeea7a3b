"""The RL machinery's learning test (docs/rl_diagnostics.md): PPO through the oracle teacher's
module, loss, network and data path learns the deal-in drill (``+experiment=mahjong_drill``) in
seconds, and learns nothing when the policy's gradient is cut from the network."""

from __future__ import annotations

import pytest
import torch

from meeple.cli.train import train
from meeple.config.compose import compose_config
from meeple.errors import ConfigError
from meeple.phases.ppo.module import PPOModule
from meeple_mahjong.drill import DealInDrill
from meeple_mahjong.safety import WAITS

# 12 rollouts of 64 games x 16 decisions; the start puts ~0.2 of its mass on dealing discards.
RUN = ["+experiment=mahjong_drill", "tracking=none", "checkpoint=none", "callbacks.progress=null",
       "callbacks.curves=null", "hardware.torch_threads=1", "phase.total_frames=12288"]


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # outputs/ lands there


def test_ppo_learns_to_leave_the_tile_an_opponent_waits_on(in_tmp):
    metrics = train(compose_config(RUN))
    assert metrics["oracle/dealing_mass"] < 0.08, metrics["oracle/dealing_mass"]
    assert metrics["eval/episode_return"] > -0.6  # greedy on fresh seeds: under 0.6 deal-ins a game (1.6 at the start)
    # the signal is right in sign, and the policy's gradient reaches the oracle stem
    assert metrics["oracle/advantage_dealing"] < 0 < metrics["oracle/advantage_safe"] + 0.2
    assert metrics["grad/objective/oracle_stem"] > 0
    assert metrics["grad/critic/shared"] == 0  # model.detach_critic: the value loss stays in its head


def test_a_policy_gradient_cut_from_the_network_learns_nothing(in_tmp, monkeypatch):
    learning = PPOModule.loss_terms

    def cut(self, batch):  # the broken update: the clipped surrogate no longer reaches any weight
        terms, metrics = learning(self, batch)
        terms["objective"] = terms["objective"].detach()
        return terms, metrics

    monkeypatch.setattr(PPOModule, "loss_terms", cut)
    metrics = train(compose_config(RUN))
    assert metrics["oracle/dealing_mass"] > 0.15, metrics["oracle/dealing_mass"]
    assert metrics["eval/episode_return"] < -1.0
    assert "grad/objective/oracle_stem" not in metrics


def test_the_drill_marks_exactly_the_kinds_that_deal_in():
    env = DealInDrill(256, choices=5, waits=2, reward_noise=0.0)
    env.set_seed(3)
    td = env.reset()
    legal = td["action_mask"][:, :34]
    danger = td["oracle"][:, WAITS] > 0.5
    assert (legal.sum(-1) == 5).all() and (danger.sum(-1) == 2).all()
    assert (danger & ~legal).sum() == 0  # an opponent waits only on kinds the hand can give away
    assert torch.equal(td["observation"][:, 0] > 0.5, legal)
    td["action"] = (danger.float() * 2 + legal.float()).argmax(-1)  # discard a dealing kind
    out = env.step(td)["next"]
    assert torch.equal(out["reward"].squeeze(-1), torch.full((256,), -1.0))
    # the next decision is a new hand: discard a kind nobody waits on
    legal, danger = out["action_mask"][:, :34], out["oracle"][:, WAITS] > 0.5
    out["action"] = (legal & ~danger).float().argmax(-1)
    assert torch.equal(env.step(out)["next"]["reward"].squeeze(-1), torch.zeros(256))
    with pytest.raises(ConfigError, match="waits < choices"):
        DealInDrill(2, choices=3, waits=3)
    with pytest.raises(ConfigError, match="danger_rate"):
        DealInDrill(2, danger_rate=0.0)


def test_with_a_danger_rate_only_that_share_of_decisions_offers_a_deal_in():
    env = DealInDrill(4096, choices=5, waits=1, danger_rate=0.2)
    td = env.reset()
    legal, danger = td["action_mask"][:, :34], td["oracle"][:, WAITS] > 0.5
    assert (danger.sum(-1) == 1).all()  # an opponent always waits on something
    offered = (danger & legal).any(-1).float().mean()
    assert 0.17 < offered < 0.23, offered
