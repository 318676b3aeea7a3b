"""Native shanten against the `xiangting` package (which returns shanten + 1)."""

import random

import numpy as np
import pytest
import xiangting

import meeple_mahjong as mj
from meeple_mahjong.testing import HAND_SIZES, near_complete_counts, random_concealed_counts

N_HANDS = 100_000


def _xiangting_shanten(counts) -> int:
    return (
        xiangting.calculate_replacement_number(list(map(int, counts)), xiangting.PlayerCount.FOUR)
        - 1
    )


def test_matches_xiangting_on_100k_hands_of_every_size():
    rng = random.Random(20261121)
    hands = np.empty((N_HANDS, 34), np.uint8)
    for i in range(N_HANDS):
        n = HAND_SIZES[i % len(HAND_SIZES)]  # concealed sizes with 4, 3, 2, 1, 0 melds
        hands[i] = near_complete_counts(rng, n) if i % 3 == 0 else random_concealed_counts(rng, n)
    ours = mj.shanten_batch(hands)[:, 0]
    ref = np.array([_xiangting_shanten(h) for h in hands])
    bad = np.flatnonzero(ours != ref)
    assert bad.size == 0, [(hands[i].tolist(), int(ours[i]), int(ref[i])) for i in bad[:5]]
    # The sample spans complete hands to far-off ones, and every size.
    assert set(np.unique(ours)) >= {-1, 0, 1, 2, 3, 4, 5}
    assert set(hands.sum(1).tolist()) == set(HAND_SIZES)


@pytest.mark.parametrize(
    ("hand", "expected"),
    [
        ("123m456p789s1122z", 0),  # tenpai on a shanpon
        ("123m456p789s11222z", -1),  # complete
        ("19m19p19s1234567z", 0),  # thirteen-sided orphans wait
        ("119m19p19s1234567z", -1),
        ("1122m3344p5566s7z", 0),  # seven pairs tenpai
        ("111122223333444z", None),  # 16 tiles: rejected below
        ("1111m", 1),  # four copies can't wait on the fifth: needs a new pair and a swap
        ("5z", 0),  # one tile (four melds called): tanki wait
    ],
)
def test_known_hands(hand, expected):
    counts = mj.parse_counts(hand)
    if expected is None:
        with pytest.raises(ValueError, match="1, 2, 4, 5, 7, 8, 10, 11, 13 or 14 tiles"):
            mj.shanten(counts)
        return
    assert mj.shanten(counts) == expected == _xiangting_shanten(counts)


def test_parts_and_bad_input():
    regular, pairs, orphans = mj.shanten_parts(mj.parse_counts("1122m3344p5566s7z"))
    assert (pairs, orphans) == (0, 10) and regular > 0
    assert mj.shanten_parts(mj.parse_counts("1122m"))[1:] == [99, 99]  # needs 13+ tiles
    with pytest.raises(ValueError, match="34 tile counts"):
        mj.shanten([1, 2, 3])
    with pytest.raises(ValueError, match="counts must be in 0..4"):
        mj.shanten([5] + [0] * 33)
    with pytest.raises(ValueError, match=r"shape \(N, 34\)"):
        mj.shanten_batch(np.zeros((2, 33), np.uint8))
    with pytest.raises(ValueError, match="bad hand string"):
        mj.parse_counts("123x")
