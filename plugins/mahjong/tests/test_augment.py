"""Suit permutations: a game replayed on permuted walls with permuted actions is the permuted game.

For every one of the six permutations, seeded random games are played twice (original, and
permuted walls + permuted actions); at every decision the legal sets, the legal masks (via
`action_permutation`), the public and oracle planes of every seat, and at the end the MJAI
streams must correspond exactly.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

import meeple_mahjong as mj
from meeple_mahjong import augment

# Reference action index from the table in docs/mahjong_encoding.md (not from the C++).
_FIXED = {"daiminkan": 82, "tsumo": 151, "ron": 152, "pass": 153, "kyuushu": 154}
_RED = {16, 52, 88}


def action_index(a: mj.Action) -> int:
    def cls(t: int) -> int:
        return 34 + t // 36 if t in _RED else t // 4

    red_used = int(any(t in _RED for t in a.consumed))
    if a.type == "discard":
        return cls(a.tile)
    if a.type == "riichi":
        return 37 + cls(a.tile)
    if a.type == "chi":
        c = a.tile // 4
        lo, hi = sorted(t // 4 for t in a.consumed)
        pos = 0 if c < lo else (1 if c < hi else 2)
        return 74 + 2 * pos + red_used
    if a.type == "pon":
        return 80 + red_used
    if a.type == "ankan":
        return 83 + a.tile // 4
    if a.type == "kakan":
        return 117 + a.tile // 4
    return _FIXED[a.type]


def mask_of(actions) -> np.ndarray:
    m = np.zeros(mj.NUM_ACTIONS, dtype=np.uint8)
    for a in actions:
        i = action_index(a)
        assert m[i] == 0, f"two legal actions share index {i}"
        m[i] = 1
    return m


def test_tile_permutation_keeps_red_fives_red():
    for perm in augment.SUIT_PERMUTATIONS:
        tp = augment.tile_permutation(perm)
        assert sorted(tp.tolist()) == list(range(136))
        assert {int(tp[t]) for t in _RED} == _RED
        for s in range(3):
            assert tp[_RED_BY_SUIT[s]] == _RED_BY_SUIT[perm[s]]
        assert (tp[108:] == np.arange(108, 136)).all()  # honors fixed
    assert augment.permute_tile(16, (1, 0, 2)) == 52
    assert augment.permute_tile(-1, (1, 0, 2)) == -1
    assert augment.permute_event(
        '{"type":"dahai","actor":0,"pai":"5mr","tsumogiri":false}', (2, 0, 1)
    ) == ('{"type":"dahai","actor":0,"pai":"5sr","tsumogiri":false}')


_RED_BY_SUIT = (16, 52, 88)


def test_action_permutation_is_a_permutation():
    for perm in augment.SUIT_PERMUTATIONS:
        ap = augment.action_permutation(perm)
        assert sorted(ap.tolist()) == list(range(mj.NUM_ACTIONS))
        assert (ap[74:83] == np.arange(74, 83)).all() and (ap[151:] == np.arange(151, 155)).all()
    ap = augment.action_permutation((2, 0, 1))  # man -> sou
    assert ap[0] == 18 and ap[34] == 36 and ap[37 + 34] == 37 + 36 and ap[83 + 4] == 83 + 22


def test_bad_permutations_are_refused():
    with pytest.raises(ValueError, match="permutation of"):
        augment.kind_permutation((0, 0, 1))
    with pytest.raises(ValueError, match="136 tile ids"):
        augment.permute_wall([0, 1], (0, 1, 2))
    with pytest.raises(ValueError, match="34 columns"):
        augment.permute_planes(np.zeros((3, 33)), (0, 1, 2))


def test_planes_and_masks_permute_as_numpy_and_torch():
    torch = pytest.importorskip("torch")
    g = mj.Game()
    g.reset(3, 0)
    x = mj.encode_public(g, 0)
    mask = mask_of(g.legal_actions(0))
    for perm in augment.SUIT_PERMUTATIONS:
        kp, ap = augment.kind_permutation(perm), augment.action_permutation(perm)
        px = augment.permute_planes(x, perm)
        for k in range(34):
            np.testing.assert_array_equal(px[:, kp[k]], x[:, k])
        pm = augment.permute_mask(mask, perm)
        assert all(pm[ap[i]] == mask[i] for i in range(mj.NUM_ACTIONS))
        batch = torch.from_numpy(np.stack([x, x]))
        np.testing.assert_array_equal(
            augment.permute_planes(batch, perm).numpy(), np.stack([px, px])
        )
        np.testing.assert_array_equal(
            augment.permute_mask(torch.from_numpy(mask), perm).numpy(), pm
        )


def _pick(g: mj.Game, seat: int, legal, rng: random.Random):
    """Random-ish play that wins, declares riichi, mostly lowers shanten and often passes,
    so the streams have wins, riichi and calls."""
    wins = [a for a in legal if a.type in ("tsumo", "ron", "riichi")]
    if wins and rng.random() < 0.9:
        return rng.choice(wins)
    passes = [a for a in legal if a.type == "pass"]
    if passes and rng.random() < 0.7:
        return passes[0]
    discards = [a for a in legal if a.type == "discard"]
    if discards and rng.random() < 0.8:
        counts = [0] * 34
        for t in g.hand(seat):
            counts[t // 4] += 1

        def after(a):
            counts[a.tile // 4] -= 1
            s = mj.shanten(counts)
            counts[a.tile // 4] += 1
            return s

        best = min(after(a) for a in discards)
        return rng.choice([a for a in discards if after(a) == best])
    return rng.choice(legal)


def _play_pair(perm, seed: int, max_decisions: int) -> int:
    walls = [mj.wall(seed, 0, i, 0) for i in range(40)]
    g, gp = mj.Game(), mj.Game()
    g.reset_with_walls(walls)
    gp.reset_with_walls([augment.permute_wall(w, perm) for w in walls])
    rng = random.Random(seed)
    pub, pub_p = np.empty((84, 34), np.float32), np.empty((84, 34), np.float32)
    orc, orc_p = np.empty((205, 34), np.float32), np.empty((205, 34), np.float32)
    ap = augment.action_permutation(perm)
    decisions = 0
    while not g.is_done() and decisions < max_decisions:
        assert g.pending() == gp.pending()
        seat = g.pending()[0]
        legal = g.legal_actions(seat)
        legal_p = gp.legal_actions(seat)
        assert {augment.permute_action(a, perm) for a in legal} == set(legal_p)
        mask = mask_of(legal)
        mask_p = mask_of(legal_p)
        assert (augment.permute_mask(mask, perm) == mask_p).all()
        assert (mask_p[ap] == mask).all()
        for s in range(4):
            mj.encode_public(g, s, pub)
            mj.encode_public(gp, s, pub_p)
            np.testing.assert_array_equal(augment.permute_planes(pub, perm), pub_p)
        mj.encode_oracle(g, seat, orc)
        mj.encode_oracle(gp, seat, orc_p)
        np.testing.assert_array_equal(augment.permute_planes(orc, perm), orc_p)
        a = _pick(g, seat, legal, rng)
        g.step(seat, a)
        gp.step(seat, augment.permute_action(a, perm))
        decisions += 1
    assert augment.permute_events(g.events(), perm) == gp.events()
    assert g.scores == gp.scores
    return decisions


@pytest.mark.parametrize(
    "perm", augment.SUIT_PERMUTATIONS, ids=lambda p: "".join("mps"[s] for s in p)
)
def test_permuted_game_is_the_permuted_original(perm):
    total = sum(_play_pair(perm, seed, 700) for seed in (1, 2))
    assert total > 1000
