"""The packed-frame ABI: bit order, round trips, LUTs (meeple.envs.packed)."""

import pytest
import torch

from meeple.envs import packed


def test_constants():
    assert (packed.WIDTH, packed.HEIGHT, packed.ROW_BYTES, packed.FRAME_BYTES) == (80, 72, 20, 1440)


def test_hand_built_bytes_fix_the_bit_order():
    pixels = torch.zeros(72, 80, dtype=torch.uint8)
    pixels[0, :4] = torch.tensor([1, 2, 3, 0])  # byte = p0 | p1<<2 | p2<<4 | p3<<6
    pixels[0, 4:8] = torch.tensor([0, 0, 0, 3])
    pixels[1, 76:80] = torch.tensor([3, 3, 3, 3])
    frame = packed.pack(pixels)
    assert frame.shape == (72, 20)
    assert frame[0, 0].item() == 1 | 2 << 2 | 3 << 4 == 0b00111001
    assert frame[0, 1].item() == 0b11000000
    assert frame[1, 19].item() == 0xFF
    assert int(frame.sum()) == 0b00111001 + 0b11000000 + 0xFF
    assert torch.equal(packed.UNPACK_LUT[0b00111001], torch.tensor([1, 2, 3, 0], dtype=torch.uint8))


def test_round_trips_both_ways():
    gen = torch.Generator().manual_seed(0)
    frames = torch.randint(0, 256, (5, 3, 72, 20), generator=gen, dtype=torch.uint8)
    assert torch.equal(packed.pack(packed.unpack(frames)), frames)
    pixels = torch.randint(0, 4, (5, 72, 80), generator=gen, dtype=torch.uint8)
    assert torch.equal(packed.unpack(packed.pack(pixels)), pixels)


def test_lut_unpack_equals_shift_unpack():
    frames = torch.randint(
        0, 256, (4, 72, 20), generator=torch.Generator().manual_seed(1), dtype=torch.uint8
    )
    assert packed.UNPACK_LUT.shape == (256, 4)
    assert torch.equal(packed.unpack_lut(frames), packed.unpack(frames))
    as_float = packed.unpack_lut(frames, packed.make_unpack_lut(torch.float32, 1 / 3))
    assert torch.allclose(as_float, packed.unpack(frames).float() / 3)


def test_diff_lut_distance_equals_unpacked_l1_on_random_frames():
    gen = torch.Generator().manual_seed(2)
    a = torch.randint(0, 256, (16, 72, 20), generator=gen, dtype=torch.uint8)
    b = torch.randint(0, 256, (16, 72, 20), generator=gen, dtype=torch.uint8)
    b[0] = a[0]  # one identical pair: distance 0
    expected = (packed.unpack(a).int() - packed.unpack(b).int()).abs().sum(dim=(-2, -1))
    assert packed.DIFF_LUT.shape == (256, 256)
    assert torch.equal(packed.packed_l1(a, b), expected)
    assert packed.packed_l1(a, b)[0] == 0
    full = torch.full((72, 20), 0xFF, dtype=torch.uint8)
    assert packed.packed_l1(full, torch.zeros_like(full)) == packed.MAX_FRAME_L1


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="shades must be in 0..3"):
        packed.pack(torch.full((72, 80), 4, dtype=torch.uint8))
    with pytest.raises(ValueError, match=r"end in \(72, 80\)"):
        packed.pack(torch.zeros(72, 81, dtype=torch.uint8))
    with pytest.raises(TypeError, match="torch.uint8"):
        packed.unpack(torch.zeros(72, 20, dtype=torch.int32))


def test_rollout_bytes_ratios():
    report = packed.rollout_bytes(steps=7, num_envs=3, frames_per_obs=2)
    assert report["packed"] == 8 * 3 * 2 * 1440
    assert report["unpacked_uint8"] == 4 * report["packed"]
    assert report["unpacked_float32"] == 16 * report["packed"]
