"""Fused packed-frame unpack in one Warp kernel (CPU or CUDA): each thread reads one byte
and writes its 4 pixels' values from a LUT, so the bytes are read once and nothing else is
materialised (the eager torch path converts the indices to int32 first)."""

from __future__ import annotations

import torch
import warp as wp

from meeple.envs.packed import UNPACK_LUT, WIDTH
from meeple.envs.warp_init import init_warp

wp.set_module_options({"enable_backward": False})


@wp.kernel
def unpack_float_kernel(
    packed: wp.array(dtype=wp.uint8),
    lut: wp.array(dtype=wp.float32),
    out: wp.array(dtype=wp.float32),
):
    i = wp.tid()
    b = int(packed[i]) * 4
    o = i * 4
    out[o] = lut[b]
    out[o + 1] = lut[b + 1]
    out[o + 2] = lut[b + 2]
    out[o + 3] = lut[b + 3]


class WarpUnpacker:
    """``(..., 72, 20)`` uint8 -> ``(..., 72, 80)`` float32 ``UNPACK_LUT * scale`` (contiguous input)."""

    def __init__(self, device: str | torch.device, scale: float = 1.0 / 3.0) -> None:
        init_warp()
        self.device = torch.device(device)
        self._lut = (UNPACK_LUT.to(torch.float32) * scale).reshape(-1).contiguous().to(self.device)
        self._wlut = wp.from_torch(self._lut)

    def __call__(self, packed: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        if packed.dtype != torch.uint8 or not packed.is_contiguous():
            raise ValueError(f"packed frames must be contiguous uint8, got {packed.dtype}")
        if out is None:
            out = torch.empty(*packed.shape[:-1], WIDTH, dtype=torch.float32, device=packed.device)
        stream = (
            wp.stream_from_torch(torch.cuda.current_stream(packed.device))
            if packed.is_cuda
            else None
        )
        wp.launch(
            unpack_float_kernel,
            dim=packed.numel(),
            inputs=[wp.from_torch(packed.view(-1)), self._wlut, wp.from_torch(out.view(-1))],
            device=wp.device_from_torch(packed.device),
            stream=stream,
        )
        return out
