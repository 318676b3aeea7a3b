"""AlphaZero-style residual policy/value network for board planes ``(C, H, W)``."""

from __future__ import annotations

import torch
from torch import nn


def _conv_bn(in_ch: int, out_ch: int, kernel: int) -> list[nn.Module]:
    # No conv bias: BatchNorm's shift replaces it.
    return [nn.Conv2d(in_ch, out_ch, kernel, padding=kernel // 2, bias=False), nn.BatchNorm2d(out_ch)]


class ResidualBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.body = nn.Sequential(*_conv_bn(channels, channels, 3), nn.ReLU(inplace=True), *_conv_bn(channels, channels, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + self.body(x))


class AZResNet(nn.Module):
    """Stem, ``blocks`` residual blocks, a policy head (logits) and a value head (tanh).

    ``forward(planes) -> (logits (B, num_actions), value (B,))``; the value is from the
    point of view of the side to move, like the planes.
    """

    def __init__(
        self,
        planes_shape: tuple[int, int, int],
        num_actions: int,
        channels: int = 64,
        blocks: int = 4,
        policy_channels: int = 2,
        value_channels: int = 1,
        value_hidden: int = 64,
    ) -> None:
        super().__init__()
        in_ch, height, width = planes_shape
        self.planes_shape = tuple(planes_shape)
        self.num_actions = num_actions
        self.stem = nn.Sequential(*_conv_bn(in_ch, channels, 3), nn.ReLU(inplace=True))
        self.tower = nn.Sequential(*(ResidualBlock(channels) for _ in range(blocks)))
        cells = height * width
        self.policy_head = nn.Sequential(
            *_conv_bn(channels, policy_channels, 1), nn.ReLU(inplace=True), nn.Flatten(),
            nn.Linear(policy_channels * cells, num_actions),
        )
        self.value_head = nn.Sequential(
            *_conv_bn(channels, value_channels, 1), nn.ReLU(inplace=True), nn.Flatten(),
            nn.Linear(value_channels * cells, value_hidden), nn.ReLU(inplace=True),
            nn.Linear(value_hidden, 1), nn.Tanh(),
        )

    def forward(self, planes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.tower(self.stem(planes))
        return self.policy_head(x), self.value_head(x).squeeze(-1)


def build_az_resnet(planes_shape: tuple[int, int, int], num_actions: int, **kwargs) -> AZResNet:
    """Hydra factory (``conf/model/az_resnet.yaml``): the game supplies the shapes."""
    return AZResNet(tuple(planes_shape), num_actions, **kwargs)
