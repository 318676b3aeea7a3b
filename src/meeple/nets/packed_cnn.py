"""A CNN actor-critic that reads packed frames and unpacks them inside ``forward``.

Input: ``(B, K, 72, 20)`` uint8 packed frames (the rollout storage's layout, no
preprocessing). The first op gathers each byte's 4 shades from a float LUT, so the
unpacked frames exist only as the first conv's float input, never as uint8 copies.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from meeple.envs.packed import FRAME_SHAPE, HEIGHT, SHADES, WIDTH, make_unpack_lut


class PackedUnpack(nn.Module):
    """``(B, K, 72, 20)`` uint8 -> ``(B, K, 72, 80)`` float32 shades scaled to [0, 1]."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer(
            "lut", make_unpack_lut(torch.float32, 1.0 / (SHADES - 1)), persistent=False
        )

    def forward(self, packed: torch.Tensor) -> torch.Tensor:
        if packed.dtype != torch.uint8 or tuple(packed.shape[-2:]) != FRAME_SHAPE:
            raise ValueError(
                f"expected packed frames (..., {FRAME_SHAPE[0]}, {FRAME_SHAPE[1]}) uint8, "
                f"got {tuple(packed.shape)} {packed.dtype}"
            )
        return nn.functional.embedding(packed.int(), self.lut).reshape(*packed.shape[:-1], WIDTH)


class CellPatches(nn.Module):
    """A 4x4-stride-4 convolution written as one matmul over non-overlapping patches.

    Same function as ``nn.Conv2d(k, c, 4, stride=4)`` (one 4x4 patch = one grid cell of
    GoalGrid, 4 rows of one packed byte); on CPU its backward is several times faster.
    """

    def __init__(self, in_channels: int, out_channels: int, patch: int = 4) -> None:
        super().__init__()
        self.patch = patch
        self.linear = nn.Linear(in_channels * patch * patch, out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, k, h, w = x.shape
        p = self.patch
        patches = (
            x.reshape(b, k, h // p, p, w // p, p)
            .permute(0, 2, 4, 1, 3, 5)
            .reshape(b, h // p, w // p, k * p * p)
        )
        return self.linear(patches).permute(0, 3, 1, 2)


class PackedCNN(nn.Module):
    """Shared conv trunk, policy logits head and value head: ``forward(obs) -> (logits, value)``."""

    def __init__(
        self,
        frames_per_obs: int,
        num_actions: int,
        channels: Sequence[int] = (16, 32),
        hidden: int = 256,
    ) -> None:
        super().__init__()
        if frames_per_obs < 1 or num_actions < 1:
            raise ValueError(
                f"frames_per_obs={frames_per_obs}, num_actions={num_actions}: accepted: integers >= 1"
            )
        self.frames_per_obs = frames_per_obs
        self.num_actions = num_actions
        self.unpack = PackedUnpack()
        c1, c2 = channels
        self.trunk = nn.Sequential(
            CellPatches(frames_per_obs, c1),
            nn.ReLU(),  # 18 x 20 (one grid cell each)
            nn.Conv2d(c1, c2, kernel_size=3, stride=2),
            nn.ReLU(),  # 8 x 9
            nn.Flatten(),
        )
        with torch.no_grad():
            flat = self.trunk(torch.zeros(1, frames_per_obs, HEIGHT, WIDTH)).shape[-1]
        self.body = nn.Sequential(nn.Linear(flat, hidden), nn.ReLU())
        self.policy_head = nn.Linear(hidden, num_actions)
        self.value_head = nn.Linear(hidden, 1)
        nn.init.orthogonal_(self.policy_head.weight, gain=0.01)
        nn.init.zeros_(self.policy_head.bias)

    def forward(self, packed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.body(self.trunk(self.unpack(packed)))
        return self.policy_head(features), self.value_head(features).squeeze(-1)


def build_packed_cnn(
    frames_per_obs: int, num_actions: int, channels: Sequence[int] = (16, 32), hidden: int = 256
) -> PackedCNN:
    return PackedCNN(frames_per_obs, num_actions, tuple(channels), hidden)
