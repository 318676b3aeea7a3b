"""Baseline players for evaluation: uniformly random legal actions, and a scripted shopper."""

from __future__ import annotations

import numpy as np

from meeple_autobattler import layout as L


def random_actions(rng: np.random.Generator, mask: np.ndarray) -> np.ndarray:
    """One uniformly random legal action per row of ``mask`` ([rows, actions])."""
    noise = rng.random(mask.shape)
    return np.where(mask, noise, -1.0).argmax(axis=1).astype(np.int32)


def scripted_actions(obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """A simple greedy player, row by row: fill the board from the bench; buy the highest-tier
    unit it can (a copy of one it owns first); buy experience when rich; else end the turn."""
    return np.array([_scripted(o, m) for o, m in zip(obs, mask)], dtype=np.int32)


def _scripted(obs: np.ndarray, mask: np.ndarray) -> int:
    def kind_at(slot: int) -> int:
        at = L.unit_slot(slot)
        return int(obs[at + 1 : at + 1 + L.NUM_KINDS].argmax()) if obs[at] > 0 else -1

    board_kinds = [kind_at(c) for c in range(L.BOARD)]
    # a bench unit onto a free front-most board cell, when the level allows it
    for b in range(L.BENCH):
        if kind_at(L.BOARD + b) < 0:
            continue
        for c in range(L.BOARD):
            if board_kinds[c] < 0 and mask[L.A_SWAP + b * L.BOARD + c]:
                return L.A_SWAP + b * L.BOARD + c
    owned = {k for k in board_kinds if k >= 0}
    buys = [(kind_at(L.BOARD + L.BENCH + s) in owned, L.tier_of_kind(kind_at(L.BOARD + L.BENCH + s)), -s)
            for s in range(L.SHOP) if mask[L.A_BUY + s]]
    if buys:
        return L.A_BUY - max(buys)[2]
    gold = obs[L.O_SELF + L.SELF_GOLD] * 50
    if mask[L.A_XP] and gold >= 10:
        return L.A_XP
    return L.A_END
