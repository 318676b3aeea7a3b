"""Native scoring against the `mahjong` package (2.x, open tanyao and red fives on)."""

import random
from collections import Counter

import pytest
from mahjong.hand_calculating.yaku_config import YakuConfig

import meeple_mahjong as mj
from meeple_mahjong.peers import DORA_NAMES, our_score, peer_score
from meeple_mahjong.testing import random_win

N_HANDS = 10_000


def test_matches_mahjong_package_on_10k_random_wins():
    rng = random.Random(4)
    cases = [random_win(rng) for _ in range(N_HANDS)]
    seen = Counter()
    bad = []
    for i, case in enumerate(cases):
        ours, peer = our_score(case), peer_score(case)
        if ours != peer:
            bad.append((i, case, ours, peer))
        if peer["ok"]:
            seen.update(peer["yaku"])
            seen["won"] += 1
            seen["ron" if not case.flags["tsumo"] else "tsumo"] += 1
            seen["honba"] += case.flags["honba"] > 0
    assert not bad, bad[:3]
    # The sample exercises every yaku the rules score (and both win types, honba).
    every = set(vars(YakuConfig())) - {
        "open_riichi", "daburu_open_riichi", "nagashi_mangan", "renhou", "daisharin", "daichisei",
        "renhou_yakuman", "sashikomi", "paarenchan", *DORA_NAMES,
    }  # fmt: skip
    assert every <= set(seen), sorted(every - set(seen))
    assert seen["won"] > 0.85 * N_HANDS and min(seen["ron"], seen["tsumo"], seen["honba"]) > 1000


def _ids(hand: str) -> list[int]:
    """136 ids for a compact hand string, lowest free copy first (copy 0 of a five is red)."""
    counts = mj.parse_counts(hand)
    return [k * 4 + c + 1 for k in range(34) for c in range(counts[k])]  # copies 1..: no red


@pytest.mark.parametrize(
    ("hand", "win", "flags", "han", "fu", "total"),
    [
        # Published table values. Riichi pinfu ron + one dora (6s): dealer 3 han 30 fu = 5800;
        # as South the 2z pair is a seat-wind pair (2 fu, no pinfu): 2 han 40 fu = 2600.
        (
            "234m456p678s22z345s",
            "3s",
            {"riichi": True, "dora_indicators": [4 * 22 + 1]},
            3,
            30,
            5800,
        ),
        (
            "234m456p678s22z345s",
            "3s",
            {"riichi": True, "seat_wind": 1, "dora_indicators": [4 * 22 + 1]},
            2,
            40,
            2600,
        ),
        ("123m456p789s11z5556s", "6s", {"seat_wind": 1}, None, None, None),  # no yaku
        ("234567m234p66s", "6s", {}, None, None, None),  # 13 tiles: bad input
    ],
)
def test_known_hands(hand, win, flags, han, fu, total):
    closed = _ids(hand)
    win_tile = next(t for t in closed if t // 4 == mj.mjai_to_kind(win))
    if len(closed) != 14:
        with pytest.raises(ValueError, match="concealed part has 14 tiles"):
            mj.score_hand(closed, [], win_tile, **flags)
        return
    r = mj.score_hand(closed, [], win_tile, **flags)
    if han is None:
        assert not r["ok"] and r["error"] == "no yaku"
        return
    assert (r["han"], r["fu"], r["payment"]["total"]) == (han, fu, total)


def test_payments_and_bad_input():
    # Dealer tsumo mangan (riichi ippatsu tsumo sanshoku; 111p: no tanyao) with 2 honba and 3 sticks:
    # 4000 + 200 from each player, 3000 in sticks.
    closed = _ids("234m234p234s55m111p")
    r = mj.score_hand(
        closed, [], closed[-1], tsumo=True, riichi=True, ippatsu=True, honba=2, riichi_sticks=3
    )
    p = r["payment"]
    assert (r["han"], r["limit"]) == (5, "mangan")
    assert (p["main"], p["additional"], p["additional_bonus"], p["kyoutaku_bonus"], p["total"]) == (
        4000, 4000, 200, 3000, 15600,
    )  # fmt: skip
    with pytest.raises(ValueError, match="riichi needs a closed hand"):
        pon = [4 * 31 + 1, 4 * 31 + 2, 4 * 31 + 3]
        mj.score_hand(_ids("234m234p234s55m"), [("pon", pon)], 4 * 1 + 1, riichi=True)
    with pytest.raises(ValueError, match="unknown meld type 'kan'"):
        mj.score_hand(_ids("234m234p234s55m"), [("kan", [1, 2, 3, 0])], 4 * 1 + 1)
    with pytest.raises(ValueError, match="is used twice"):
        mj.score_hand([1] * 14, [], 1)
