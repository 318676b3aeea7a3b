"""Observation encoders: plane values in hand-built situations, full overwrite, bad input.

Plane indices follow docs/mahjong_encoding.md (the constants below are copied from its tables).
"""

from __future__ import annotations

import random

import numpy as np
import pytest

import meeple_mahjong as mj

# Public planes (docs/mahjong_encoding.md).
HAND, RED_HAND, DRAWN, KUIKAE, SHANTEN = 0, 4, 5, 6, 7
SEAT, SEAT_PLANES = 8, 14
POND, POND_COUNT, POND_FIRST, POND_RECENT, TSUMOGIRI, TEDASHI, CALLED, AFTER_RIICHI = range(8)
RIICHI_TILE, MELD_COUNT, TRIPLET, RIICHI_FLAG, SCORE, RANK = range(8, 14)
GENBUTSU, SUJI = 64, 67
DORA_IND, DORA_VALUE, RED_UNSEEN, VISIBLE, NO_CHANCE, ONE_CHANCE = 70, 71, 72, 73, 74, 75
ROUND_WIND, SEAT_WIND, OFFERED, HONBA, STICKS, TILES_LEFT, KYOKU, FIRST_GO = range(76, 84)
# Oracle planes.
OPP, NEXT_DRAWS, RINSHAN, DORA_POS, URA_POS, LIVE_COUNT, SEAT_DRAWS = 0, 27, 98, 102, 107, 112, 116


def seat_plane(r: int, j: int) -> int:
    return SEAT + r * SEAT_PLANES + j


def ids(kinds: list[int], copy: int = 1) -> list[int]:
    return [k * 4 + copy for k in kinds]


def build_wall(fixed: dict[int, int]) -> list[int]:
    """A wall with the given positions fixed and the other tiles in ascending id order."""
    rest = iter(sorted(set(range(136)) - set(fixed.values())))
    return [fixed[i] if i in fixed else next(rest) for i in range(136)]


# Seat 0 (dealer): 1m-9m with the red 5m (copy 0), 1p 2p 3p, 9s; draws 5p (copy 1) and can
# declare riichi discarding 9s (tanki wait on 5p). Dora indicator: E (dora S).
SEAT0 = [k * 4 for k in range(9)] + ids([9, 10, 11]) + ids([26])
FIRST_DRAW = 13 * 4 + 1
INDICATOR = 27 * 4


def riichi_game() -> mj.Game:
    fixed = {i: t for i, t in enumerate(SEAT0)}
    fixed[52] = FIRST_DRAW
    fixed[126] = INDICATOR
    g = mj.Game()
    g.reset_with_walls([build_wall(fixed)])
    return g


def pass_claims(g: mj.Game) -> None:
    while g.pending() and any(a.type == "pass" for a in g.legal_actions(g.pending()[0])):
        g.step(g.pending()[0], mj.Action("pass"))


def test_own_hand_drawn_tile_dora_winds_and_scalars():
    g = riichi_game()
    x = mj.encode_public(g, 0)
    assert x.shape == (84, 34) and x.dtype == np.float32
    counts = np.zeros(34)
    for t in g.hand(0):
        counts[t // 4] += 1
    for j in range(4):
        np.testing.assert_array_equal(x[HAND + j], (counts >= j + 1).astype(np.float32))
    assert x[HAND].sum() == 14 and x[HAND + 1].sum() == 0  # 14 different kinds
    assert x[RED_HAND].tolist() == [1.0 if k == 4 else 0.0 for k in range(34)]
    assert x[DRAWN].tolist() == [1.0 if k == 13 else 0.0 for k in range(34)]
    assert x[DORA_IND, 27] == 1 and x[DORA_IND].sum() == 1
    assert x[DORA_VALUE, 28] == 1 and x[DORA_VALUE].sum() == 1
    assert x[ROUND_WIND, 27] == 1 and x[ROUND_WIND].sum() == 1
    assert x[SEAT_WIND, 27] == 1 and x[SEAT_WIND].sum() == 1  # the dealer is East
    y = mj.encode_public(g, 1)
    assert y[SEAT_WIND, 28] == 1 and y[DRAWN].sum() == 0  # another seat's draw is hidden
    assert y[HAND : HAND + 4].sum() == 13
    np.testing.assert_allclose(x[TILES_LEFT], 69 / 70, rtol=1e-6)
    np.testing.assert_allclose(x[SHANTEN], 1 / 7)  # 123456789m 123p 5p 9s: shanten 0 -> (0 + 1) / 7
    assert (x[FIRST_GO] == 1).all() and (x[HONBA] == 0).all() and (x[KYOKU] == 0).all()
    np.testing.assert_allclose(x[seat_plane(0, SCORE)], 0.25)
    assert (
        (x[RED_UNSEEN, [13, 22]] == 1).all() and x[RED_UNSEEN, 4] == 0 and x[RED_UNSEEN].sum() == 2
    )
    # Visible to seat 0: its 14 tiles + the indicator.
    assert x[VISIBLE].sum() * 4 == 15


def test_riichi_discards_safety_and_scores():
    g = riichi_game()
    riichi = {a.tile // 4: a for a in g.legal_actions(0) if a.type == "riichi"}
    assert sorted(riichi) == [13, 26]  # tanki on 9s or on 5p
    dealt1 = g.hand(1)
    g.step(0, riichi[26])
    pass_claims(g)
    assert g.pending() == [1]
    (drawn1,) = set(g.hand(1)) - set(dealt1)
    drawn_kind = drawn1 // 4
    x1 = mj.encode_public(g, 1)
    assert x1[DRAWN].tolist() == [1.0 if k == drawn_kind else 0.0 for k in range(34)]
    left = 3  # seat 0 sits left of seat 1
    assert (x1[seat_plane(left, RIICHI_FLAG)] == 1).all()
    assert x1[seat_plane(left, RIICHI_TILE)].tolist() == [
        1.0 if k == 26 else 0.0 for k in range(34)
    ]
    assert x1[seat_plane(left, AFTER_RIICHI), 26] == 1 and x1[seat_plane(left, TEDASHI), 26] == 1
    assert x1[seat_plane(left, TSUMOGIRI)].sum() == 0
    np.testing.assert_allclose(x1[seat_plane(left, SCORE)], 0.24)
    np.testing.assert_allclose(x1[seat_plane(left, RANK)], 1.0)  # last after paying the stick
    np.testing.assert_allclose(x1[seat_plane(0, RANK)], 0.0)  # seats 1-3 tie at 25000; seat 1 first
    np.testing.assert_allclose(x1[STICKS], 0.25)
    assert x1[GENBUTSU + 2, 26] == 1 and x1[GENBUTSU + 2].sum() == 1  # opponent 3 (left) = seat 0
    assert x1[SUJI + 2, 23] == 0.5 and x1[SUJI + 2, 20] == 0  # 6s half-suji of 9s; 3s not
    # Seat 1 discards its drawn tile (tsumogiri); seat 2 then sees both discards in order.
    g.step(1, mj.Action("discard", drawn1))
    if any(a.type == "pass" for a in g.legal_actions(g.pending()[0])):
        # The discard is on offer: it shows as the offered tile.
        assert mj.encode_public(g, 2)[OFFERED, drawn_kind] == 1
        pass_claims(g)
    x2 = mj.encode_public(g, 2)
    left = 3  # from seat 2, seat 1 sits left
    assert (
        x2[seat_plane(left, TSUMOGIRI), drawn_kind] == 1
        and x2[seat_plane(left, TSUMOGIRI)].sum() == 1
    )
    assert x2[seat_plane(left, TEDASHI)].sum() == 0
    np.testing.assert_allclose(x2[seat_plane(left, POND_RECENT), drawn_kind], 1.0)
    np.testing.assert_allclose(x2[seat_plane(left, POND_FIRST), drawn_kind], 1 / 24, rtol=1e-6)
    np.testing.assert_allclose(
        x2[seat_plane(2, POND_RECENT), 26], 1.0
    )  # recency is within a seat's pond
    # Seat 1's tile was discarded after seat 0's riichi: genbutsu against seat 0 (across, opponent 2).
    assert x2[GENBUTSU + 1, drawn_kind] == 1 and x2[GENBUTSU + 1, 26] == 1
    assert x2[OFFERED].sum() == 0


def test_call_planes_and_kuikae():
    rng = random.Random(3)
    for seed in range(30):
        g = mj.Game()
        g.reset(seed, 0)
        while not g.is_done():
            seat = g.pending()[0]
            legal = g.legal_actions(seat)
            pons = [a for a in legal if a.type == "pon"]
            if pons:
                src = g.events()[-1]
                g.step(seat, pons[0])
                pass_claims(g)  # the others pass (a ron would outrank the pon)
                if not any(m[0] == "pon" for m in g.melds(seat)):
                    continue
                k = pons[0].tile // 4
                x = mj.encode_public(g, seat)
                assert x[seat_plane(0, TRIPLET), k] == 1 and x[seat_plane(0, MELD_COUNT), k] == 0.75
                assert x[KUIKAE, k] == 1 and x[DRAWN].sum() == 0
                assert x[FIRST_GO].sum() == 0
                discarder = [
                    s for s in range(4) if g.discards(s) and g.discards(s)[-1] == pons[0].tile
                ][0]
                xd = mj.encode_public(g, discarder)
                r = (seat - discarder) % 4
                assert xd[seat_plane(r, TRIPLET), k] == 1
                assert xd[seat_plane(0, CALLED), k] == 1, src
                return
            g.step(seat, rng.choice([a for a in legal if a.type != "pass"] or legal))
    pytest.fail("no pon in 30 seeded games")


def test_oracle_sees_the_hidden_hands_and_the_wall():
    g = riichi_game()
    o = mj.encode_oracle(g, 0)
    assert o.shape == (205, 34)
    for r in range(1, 4):
        counts = np.zeros(34)
        for t in g.hand(r):
            counts[t // 4] += 1
        np.testing.assert_array_equal(o[OPP + 9 * (r - 1) + 0], (counts >= 1).astype(np.float32))
    walls = build_wall({**{i: t for i, t in enumerate(SEAT0)}, 52: FIRST_DRAW, 126: INDICATOR})
    for i in range(69):
        assert o[NEXT_DRAWS + i, walls[53 + i] // 4] == 1 and o[NEXT_DRAWS + i].sum() == 1
    assert o[NEXT_DRAWS + 69].sum() == 0  # 69 live tiles left
    # Seat 0 just drew: the next live draw goes to seat 1 (relative 1), then 2, 3, 0.
    assert (
        o[SEAT_DRAWS + 18 * 1, walls[53] // 4] == 1 and o[SEAT_DRAWS + 18 * 0, walls[56] // 4] == 1
    )
    assert o[DORA_POS, 27] == 1 and o[URA_POS, walls[131] // 4] == 1
    assert all(o[RINSHAN + i, walls[122 + i] // 4] == 1 for i in range(4))
    np.testing.assert_allclose(o[LIVE_COUNT].sum() * 4, 69)
    # Seen from seat 1, its own hand is not in the oracle; seat 0's (relative 3) is.
    o1 = mj.encode_oracle(g, 1)
    assert o1[OPP + 9 * 2].sum() == 14 and o1[OPP + 9 * 2 + 1].sum() == 0  # seat 0: 14 kinds
    assert o1[OPP + 9 * 2 + 4, 4] == 1  # its red 5m
    np.testing.assert_array_equal(
        o1[OPP : OPP + 9], o[OPP + 9 : OPP + 18]
    )  # seat 2: rel 1 of seat 1


def test_every_value_is_written_and_buffers_are_reused():
    g = mj.Game()
    g.reset(5, 0)
    rng = random.Random(5)
    pub = np.full((84, 34), np.nan, np.float32)
    orc = np.full(205 * 34, np.nan, np.float32)
    for _ in range(300):
        seat = g.pending()[0]
        for s in range(4):
            pub.fill(np.nan)
            assert mj.encode_public(g, s, pub) is pub
            assert not np.isnan(pub).any()
            assert np.array_equal(pub, mj.encode_public(g, s))  # same as a fresh buffer
            orc.fill(np.nan)
            assert mj.encode_oracle(g, s, orc) is orc
            assert not np.isnan(orc).any()
            assert np.isfinite(pub).all() and pub.min() >= -1 and pub.max() <= 5
        g.step(seat, rng.choice(g.legal_actions(seat)))


def test_torch_buffers_are_written_in_place():
    torch = pytest.importorskip("torch")
    g = mj.Game()
    g.reset(1, 0)
    t = torch.full((84, 34), float("nan"))
    mj.encode_public(g, 0, t)
    assert not torch.isnan(t).any()
    np.testing.assert_array_equal(t.numpy(), mj.encode_public(g, 0))


def test_bad_inputs_say_what_is_accepted():
    g = mj.Game()
    g.reset(1, 0)
    with pytest.raises(TypeError, match="float32"):
        mj.encode_public(g, 0, np.zeros((84, 34), np.float64))
    with pytest.raises(ValueError, match=r"shape \(84, 34\) or \(2856,\); got shape \(205, 34\)"):
        mj.encode_public(g, 0, np.zeros((205, 34), np.float32))
    with pytest.raises(ValueError, match="non-contiguous"):
        mj.encode_oracle(g, 0, np.zeros((205, 68), np.float32)[:, ::2])
    ro = np.zeros((84, 34), np.float32)
    ro.flags.writeable = False
    with pytest.raises(TypeError, match="writable"):
        mj.encode_public(g, 0, ro)
    with pytest.raises(TypeError, match="writable"):
        mj.encode_public(g, 0, [0.0] * 2856)
    with pytest.raises(ValueError, match="seat must be in 0..3"):
        mj.encode_public(g, 4)
    with pytest.raises(ValueError, match="n must be"):
        mj.bench_encode(g, 0, 0)


def test_red_planes_are_zero_without_red_fives():
    g = mj.Game(red_fives=False)
    g.reset_with_walls([build_wall({**{i: t for i, t in enumerate(SEAT0)}, 52: FIRST_DRAW})])
    x, o = mj.encode_public(g, 0), mj.encode_oracle(g, 1)
    assert x[HAND, 4] == 1 and x[RED_HAND].sum() == 0 and x[RED_UNSEEN].sum() == 0
    assert o[OPP + 9 * 2 + 4].sum() == 0 and o[97].sum() == 0 and o[115].sum() == 0


def test_constants():
    assert (mj.PUBLIC_PLANES, mj.ORACLE_PLANES, mj.PLANE_WIDTH, mj.NUM_ACTIONS) == (
        84,
        205,
        34,
        155,
    )
    g = mj.Game()
    g.reset(2, 0)
    assert mj.bench_encode(g, 0, 1000) > 0


def test_encoder_rates_report_every_rate():
    from meeple_mahjong.encode_speed import encoder_rates

    r = encoder_rates(games=1, stride=200, repeats=16, peer=False)
    assert r["states"] >= 2
    for key in ("public_native", "oracle_native", "public_python"):
        assert r[f"meeple_{key}_obs_per_s"] > 0
