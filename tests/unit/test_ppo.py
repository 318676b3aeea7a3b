"""PPO math against hand computations, and the module's plumbing."""

from functools import partial

import pytest
import torch
from tensordict import TensorDict
from torch import nn
from torchrl.data import Categorical, Composite, Unbounded
from torchrl.modules import ValueOperator

from meeple.nets.actor_critic import build_actor_critic
from meeple.phases.ppo.module import PPOModule

OBS = Composite(observation=Unbounded(shape=(3,)))
ACT = Categorical(n=4)
GAMMA, LAMBDA = 0.9, 0.8


def make_module(critic=None, shared=False, **overrides):
    actor, default_critic = build_actor_critic(OBS, ACT, shared=shared, hidden=[8], activation="tanh")
    kwargs = dict(
        optimizer=partial(torch.optim.Adam, lr=1e-2), anneal_lr=False, max_grad_norm=0.5, gamma=GAMMA, gae_lambda=LAMBDA,
        clip_epsilon=0.2, entropy_coef=0.01, critic_coef=0.5, normalize_advantage=False,
    )
    kwargs.update(overrides)
    return PPOModule(actor, critic or default_critic, **kwargs)


def first_feature_critic():
    """V(s) = s[0], so values are known exactly."""
    linear = nn.Linear(3, 1)
    with torch.no_grad():
        linear.weight.copy_(torch.tensor([[1.0, 0.0, 0.0]]))
        linear.bias.zero_()
    return ValueOperator(linear, in_keys=["observation"])


def trajectory():
    # One env, 5 steps; step 1 truncates (done, not terminated), step 4 terminates.
    T = 5
    obs = torch.tensor([[1.0], [2.0], [3.0], [4.0], [5.0]]) * torch.tensor([[1.0, 0.5, -0.5]])
    next_obs = torch.tensor([[2.0], [7.0], [4.0], [5.0], [9.0]]) * torch.tensor([[1.0, 0.5, -0.5]])
    reward = torch.tensor([1.0, 0.5, -1.0, 2.0, 1.0]).unsqueeze(-1)
    terminated = torch.tensor([0, 0, 0, 0, 1], dtype=torch.bool).unsqueeze(-1)
    truncated = torch.tensor([0, 1, 0, 0, 0], dtype=torch.bool).unsqueeze(-1)
    done = terminated | truncated
    td = TensorDict(
        {
            "observation": obs,
            "next": {"observation": next_obs, "reward": reward, "done": done, "terminated": terminated,
                     "truncated": truncated},
        },
        batch_size=[T],
    )
    return td.unsqueeze(0)  # [env=1, time=T]


def hand_gae(td):
    v = td["observation"][0, :, 0]
    v_next = td["next", "observation"][0, :, 0]
    r = td["next", "reward"][0, :, 0]
    term = td["next", "terminated"][0, :, 0].float()
    done = td["next", "done"][0, :, 0].float()
    adv = torch.zeros(5)
    running = 0.0
    for t in reversed(range(5)):
        delta = r[t] + GAMMA * v_next[t] * (1 - term[t]) - v[t]
        running = delta + GAMMA * LAMBDA * (1 - done[t]) * running
        adv[t] = running
    return adv, adv + v


def test_gae_matches_hand_computation():
    module = make_module(critic=first_feature_critic())
    td = module.compute_advantages(trajectory())
    adv, target = hand_gae(trajectory())
    torch.testing.assert_close(td["advantage"][0, :, 0], adv)
    torch.testing.assert_close(td["value_target"][0, :, 0], target)


def rollout_batch(n=32):
    td = TensorDict(
        {
            "observation": torch.randn(n, 3),
            "action": torch.randint(0, 4, (n,)),
            "action_log_prob": torch.full((n,), -torch.log(torch.tensor(4.0)).item()),
            "next": {
                "observation": torch.randn(n, 3),
                "reward": torch.randn(n, 1),
                "done": torch.zeros(n, 1, dtype=torch.bool),
                "terminated": torch.zeros(n, 1, dtype=torch.bool),
                "truncated": torch.zeros(n, 1, dtype=torch.bool),
            },
        },
        batch_size=[n],
    )
    return td


@pytest.mark.parametrize("shared", [False, True])
def test_loss_is_scalar_and_moves_the_collector_policy(shared):
    module = make_module(shared=shared)
    batch = module.compute_advantages(rollout_batch())
    assert batch["advantage"].shape == (32, 1)
    losses = module.loss_module(batch)
    for key in ("loss_objective", "loss_critic", "loss_entropy"):
        assert losses[key].shape == ()
        assert torch.isfinite(losses[key])

    # The collector acts with module.policy: an optimiser step on the loss must change it.
    before = [p.detach().clone() for p in module.policy.parameters()]
    optimizer = torch.optim.SGD(module.loss_module.parameters(), lr=0.5)
    total = losses["loss_objective"] + losses["loss_critic"] + losses["loss_entropy"]
    total.backward()
    optimizer.step()
    assert any(not torch.equal(b, p) for b, p in zip(before, module.policy.parameters()))


def test_surrogate_coef_weighs_the_clipped_surrogate_and_refuses_a_negative_weight():
    from meeple.errors import ConfigError

    torch.manual_seed(0)
    batch = make_module().compute_advantages(rollout_batch())
    torch.manual_seed(0)
    full = make_module()
    torch.manual_seed(0)
    half = make_module(surrogate_coef=0.5)
    with torch.no_grad():  # the terms' values only
        (t1, _), (t2, _) = full.loss_terms(batch.clone()), half.loss_terms(batch.clone())
    assert float(t1["objective"]) != 0 and float(t2["objective"]) == pytest.approx(0.5 * float(t1["objective"]))
    assert float(t2["critic"]) == pytest.approx(float(t1["critic"]))  # the other terms keep their weights
    with pytest.raises(ConfigError, match=r"phase.module.surrogate_coef=-1.0; accepted: a float >= 0"):
        make_module(surrogate_coef=-1.0)


def test_shared_model_has_one_trunk():
    actor, critic = build_actor_critic(OBS, ACT, shared=True, hidden=[8, 8], activation="relu")
    actor_ids = {id(p) for p in actor.parameters()}
    critic_ids = {id(p) for p in critic.parameters()}
    assert actor_ids & critic_ids, "shared=true must share the trunk"
    separate_actor, separate_critic = build_actor_critic(OBS, ACT, shared=False, hidden=[8], activation="relu")
    assert not {id(p) for p in separate_actor.parameters()} & {id(p) for p in separate_critic.parameters()}


def test_policy_outputs_valid_actions_and_greedy_is_argmax():
    from torchrl.envs import ExplorationType, set_exploration_type

    module = make_module()
    td = module.policy(TensorDict({"observation": torch.randn(16, 3)}, batch_size=[16]))
    assert td["action"].shape == (16,) and td["action"].max() < 4
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        greedy = module.policy(td.select("observation"))
    assert torch.equal(greedy["action"], greedy["logits"].argmax(-1))
