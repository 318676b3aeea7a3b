import torch
from tensordict.nn import TensorDictModule
from torch import nn

from meeple.callbacks.evaluation import greedy_episode_returns
from meeple.env_factory import make_env


class ConstantAction(nn.Module):
    def __init__(self, action: int):
        super().__init__()
        self.action = action
        self.dummy = nn.Parameter(torch.zeros(()))

    def forward(self, obs):
        return torch.full(obs.shape[:-1], self.action, dtype=torch.int64)


def test_counts_only_each_envs_first_episode():
    # Always pushing left ends CartPole in ~10 steps; later episodes must not add up.
    env = make_env({"backend": "gym", "id": "CartPole-v1"}, num_envs=4, seed=0)
    policy = TensorDictModule(ConstantAction(0), ["observation"], ["action"])
    returns = greedy_episode_returns(env, policy, max_steps=200)
    assert returns.shape == (4,)
    assert ((returns >= 8) & (returns <= 12)).all(), returns


def test_unfinished_episodes_count_as_they_stand():
    env = make_env({"backend": "gym", "id": "CartPole-v1"}, num_envs=2, seed=0)
    policy = TensorDictModule(ConstantAction(1), ["observation"], ["action"])
    assert (greedy_episode_returns(env, policy, max_steps=3) == 3).all()
