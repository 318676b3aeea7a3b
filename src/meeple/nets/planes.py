"""Residual 1-D convolutions over feature planes: observations shaped ``(planes, width)``.

Made for tile games, whose observation is a stack of planes over the tile kinds (e.g. 84 x 34):
a convolution along the kinds sees neighbouring ranks (runs), and the channels mix every plane at
each kind. Where unrelated kinds sit next to each other in the columns, the network learns to
ignore that adjacency.
"""

from __future__ import annotations

import math

from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.data import Composite, TensorSpec
from torchrl.modules import ProbabilisticActor, ValueOperator

from meeple.errors import ConfigError
from meeple.nets.actor_critic import (
    OBS_KEY,
    categorical_actor,
    num_actions,
    observation_shape,
    shared_heads,
)
from meeple.nets.mlp import orthogonal_linear


class ResidualBlock(nn.Module):
    """Two 3-wide convolutions with a skip; no normalisation (PPO minibatches are small and
    evaluation would see other statistics)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(channels, channels, 3, padding=1)
        self.conv2 = nn.Conv1d(channels, channels, 3, padding=1)
        nn.init.zeros_(self.conv2.weight)  # each block starts as the identity
        nn.init.zeros_(self.conv2.bias)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(x + self.conv2(self.act(self.conv1(x))))


def planes_tower(planes: int, width: int, channels: int, blocks: int, hidden: int) -> nn.Sequential:
    """``(..., planes, width)`` -> ``(..., hidden)``: stem, residual blocks, a linear layer."""
    return nn.Sequential(
        _Batched(
            nn.Sequential(
                nn.Conv1d(planes, channels, 3, padding=1),
                nn.ReLU(),
                *(ResidualBlock(channels) for _ in range(blocks)),
                nn.Flatten(-2),
            )
        ),
        orthogonal_linear(channels * width, hidden, math.sqrt(2)),
        nn.ReLU(),
    )


class _Batched(nn.Module):
    """Runs a module that wants ``(N, C, W)`` on inputs with any batch dims in front."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, x):
        lead = x.shape[:-2]
        y = self.module(x.reshape(-1, *x.shape[-2:]))
        return y.reshape(*lead, *y.shape[1:])


def build_planes_actor_critic(
    observation_spec: Composite,
    action_spec: TensorSpec,
    *,
    channels: int,
    blocks: int,
    hidden: int,
    shared: bool = True,
) -> tuple[ProbabilisticActor, TensorDictModule]:
    """Categorical policy (masked when the env has ``action_mask``) and state value over planes."""
    shape = observation_shape(observation_spec)
    if len(shape) != 2:
        raise ConfigError(
            f"model planes_resnet reads (planes, width) observations; the env's are {shape}"
        )
    for name, v in (("channels", channels), ("hidden", hidden)):
        if v < 1:
            raise ConfigError(f"model.{name}={v}; accepted: an integer >= 1")
    if blocks < 0:
        raise ConfigError(f"model.blocks={blocks}; accepted: an integer >= 0")
    planes, width = shape
    if shared:
        trunk = TensorDictModule(
            planes_tower(planes, width, channels, blocks, hidden), [OBS_KEY], ["hidden"]
        )
        return shared_heads(trunk, hidden, observation_spec, action_spec)
    policy = nn.Sequential(
        planes_tower(planes, width, channels, blocks, hidden),
        orthogonal_linear(hidden, num_actions(action_spec), 0.01),
    )
    value = nn.Sequential(
        planes_tower(planes, width, channels, blocks, hidden), orthogonal_linear(hidden, 1, 1.0)
    )
    actor = categorical_actor(
        TensorDictModule(policy, [OBS_KEY], ["logits"]), observation_spec, action_spec
    )
    return actor, ValueOperator(value, in_keys=[OBS_KEY])
