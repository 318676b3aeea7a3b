"""A CNN actor-critic that reads packed frames and unpacks them inside ``forward``.

Input: ``(B, K, 72, 20)`` uint8 packed frames (the rollout storage's layout, no
preprocessing). The first op gathers each byte's 4 shades from a float LUT, so the
unpacked frames exist only as the first conv's float input, never as uint8 copies.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

import torch
from torch import nn

from meeple.envs.packed import FRAME_SHAPE, HEIGHT, SHADES, WIDTH, make_unpack_lut


class PackedUnpack(nn.Module):
    """``(B, K, 72, 20)`` uint8 -> ``(B, K, 72, 80)`` float32 shades scaled to [0, 1].

    ``kernel``: ``warp`` (one fused Warp kernel: reads each byte once, about 10x the eager
    path on CPU), ``torch`` (an embedding gather), or ``auto`` (warp when installed).
    Both give the same values; the unpacked frames need no gradient.
    """

    KERNELS = ("auto", "warp", "torch")

    def __init__(self, kernel: str = "auto") -> None:
        super().__init__()
        if kernel not in self.KERNELS:
            raise ValueError(f"kernel={kernel!r}; accepted: {', '.join(self.KERNELS)}")
        if kernel == "auto":
            kernel = "warp" if importlib.util.find_spec("warp") is not None else "torch"
        self.kernel = kernel
        lut = make_unpack_lut(torch.float32, 1.0 / (SHADES - 1))
        self.register_buffer("lut", lut, persistent=False)
        self._warp: dict[torch.device, object] = {}

    def __deepcopy__(self, memo: dict) -> PackedUnpack:
        # Warp views are per instance (an async actor's copy builds its own).
        return PackedUnpack(self.kernel).to(self.lut.device)

    def forward(self, packed: torch.Tensor) -> torch.Tensor:
        if packed.dtype != torch.uint8 or tuple(packed.shape[-2:]) != FRAME_SHAPE:
            raise ValueError(
                f"expected packed frames (..., {FRAME_SHAPE[0]}, {FRAME_SHAPE[1]}) uint8, "
                f"got {tuple(packed.shape)} {packed.dtype}"
            )
        if self.kernel == "warp":
            unpacker = self._warp.get(packed.device)
            if unpacker is None:
                from meeple.envs.packed_warp import WarpUnpacker

                unpacker = WarpUnpacker(packed.device, 1.0 / (SHADES - 1))
                self._warp[packed.device] = unpacker
            return unpacker(packed.contiguous())
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
