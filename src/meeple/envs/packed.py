"""The packed-frame ABI: 80x72 frames of 4 shades, 2 bits per pixel, 4 pixels per byte.

A frame is ``HEIGHT`` rows of ``ROW_BYTES`` bytes, row-major; pixel ``x`` of a row lives
in byte ``x // 4`` at bits ``2 * (x % 4)``::

    byte = p0 | p1 << 2 | p2 << 4 | p3 << 6        (p0 is the leftmost pixel)

so one frame is ``FRAME_BYTES`` = 1440 bytes. Everything that crosses between an env
backend and the learner (rollout storage, the CNN's input, the reward's distance) uses
this layout; :func:`pack` and :func:`unpack` are the reference both sides are tested against.

Two lookup tables make packed frames cheap to use without unpacking them first:
``UNPACK_LUT[b]`` is the 4 shades of byte ``b``, ``DIFF_LUT[a, b]`` is the L1 distance
between the 4 pixels of ``a`` and those of ``b`` (so the L1 distance of two frames is a
sum of ``DIFF_LUT`` over their 1440 byte pairs).
"""

from __future__ import annotations

import torch

WIDTH = 80
HEIGHT = 72
SHADES = 4
BITS_PER_PIXEL = 2
PIXELS_PER_BYTE = 8 // BITS_PER_PIXEL
ROW_BYTES = WIDTH // PIXELS_PER_BYTE  # 20
FRAME_BYTES = ROW_BYTES * HEIGHT  # 1440
FRAME_SHAPE = (HEIGHT, ROW_BYTES)  # a packed frame as a tensor
PIXEL_SHAPE = (HEIGHT, WIDTH)  # an unpacked frame
MAX_FRAME_L1 = (SHADES - 1) * WIDTH * HEIGHT  # the largest L1 distance between two frames

_SHIFTS = torch.arange(PIXELS_PER_BYTE, dtype=torch.uint8) * BITS_PER_PIXEL  # 0, 2, 4, 6


def _check_dtype(frames: torch.Tensor, dtype: torch.dtype, what: str) -> None:
    if frames.dtype != dtype:
        raise TypeError(f"{what} must be {dtype}, got {frames.dtype}")


def pack(pixels: torch.Tensor) -> torch.Tensor:
    """``(..., 72, 80)`` shades in 0..3 (uint8) -> ``(..., 72, 20)`` packed bytes."""
    _check_dtype(pixels, torch.uint8, "pixels")
    if tuple(pixels.shape[-2:]) != PIXEL_SHAPE:
        raise ValueError(
            f"pixels must end in {PIXEL_SHAPE} (height, width), got {tuple(pixels.shape)}"
        )
    if pixels.numel() and int(pixels.max()) >= SHADES:
        raise ValueError(f"pixel shades must be in 0..{SHADES - 1}, got max {int(pixels.max())}")
    quads = pixels.reshape(*pixels.shape[:-1], ROW_BYTES, PIXELS_PER_BYTE)
    shifted = quads << _SHIFTS.to(pixels.device)
    return shifted[..., 0] | shifted[..., 1] | shifted[..., 2] | shifted[..., 3]


def unpack(packed: torch.Tensor) -> torch.Tensor:
    """``(..., 72, 20)`` packed bytes -> ``(..., 72, 80)`` shades in 0..3 (uint8), by shifts."""
    _check_dtype(packed, torch.uint8, "packed frames")
    if tuple(packed.shape[-2:]) != FRAME_SHAPE:
        raise ValueError(
            f"packed frames must end in {FRAME_SHAPE} (height, row bytes), got {tuple(packed.shape)}"
        )
    quads = (packed.unsqueeze(-1) >> _SHIFTS.to(packed.device)) & (SHADES - 1)
    return quads.reshape(*packed.shape[:-1], WIDTH)


def make_unpack_lut(dtype: torch.dtype = torch.uint8, scale: float = 1.0) -> torch.Tensor:
    """``(256, 4)``: row ``b`` holds the shades of byte ``b``, left to right, times ``scale``.

    ``make_unpack_lut(torch.float32, 1 / 3)`` maps straight to network inputs in [0, 1].
    """
    shades = (torch.arange(256, dtype=torch.int64).unsqueeze(-1) >> _SHIFTS.long()) & (SHADES - 1)
    return (shades.to(torch.float64) * scale).to(dtype) if scale != 1.0 else shades.to(dtype)


def make_diff_lut() -> torch.Tensor:
    """``(256, 256)`` int32: ``[a, b]`` is the L1 distance between the 4 pixels of ``a`` and of ``b``."""
    shades = make_unpack_lut(torch.int32)
    return (shades.unsqueeze(1) - shades.unsqueeze(0)).abs().sum(-1).to(torch.int32)


UNPACK_LUT = make_unpack_lut()
DIFF_LUT = make_diff_lut()


def unpack_lut(packed: torch.Tensor, lut: torch.Tensor = UNPACK_LUT) -> torch.Tensor:
    """``(..., 72, 20)`` packed bytes -> ``(..., 72, 80)`` values of ``lut`` (any dtype), one gather."""
    _check_dtype(packed, torch.uint8, "packed frames")
    values = torch.nn.functional.embedding(packed.int(), lut.to(packed.device))
    return values.reshape(*packed.shape[:-1], WIDTH)


def packed_l1(a: torch.Tensor, b: torch.Tensor, diff_lut: torch.Tensor = DIFF_LUT) -> torch.Tensor:
    """L1 distance of the unpacked frames, computed on packed bytes: ``(..., 72, 20)`` -> ``(...)`` int32."""
    _check_dtype(a, torch.uint8, "frames a")
    _check_dtype(b, torch.uint8, "frames b")
    index = a.int() * 256 + b.int()
    return diff_lut.to(a.device).reshape(-1)[index].sum(dim=(-2, -1), dtype=torch.int32)


def rollout_bytes(steps: int, num_envs: int, frames_per_obs: int) -> dict[str, int]:
    """Observation bytes of a ``(steps + 1, num_envs, frames_per_obs)`` rollout, packed and unpacked."""
    frames = (steps + 1) * num_envs * frames_per_obs
    return {
        "packed": frames * FRAME_BYTES,
        "unpacked_uint8": frames * WIDTH * HEIGHT,
        "unpacked_float32": frames * WIDTH * HEIGHT * 4,
    }
