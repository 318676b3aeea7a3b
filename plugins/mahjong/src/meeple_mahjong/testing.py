"""Random hands for peer checks: concealed hands for shanten, winning hands with conditions.

Pure Python and seeded (`random.Random`, faster than numpy for these small draws), so
a failing case is reproducible from its seed and index. Tiles are 136 ids (kind * 4 + copy; ids 16/52/88 are the red fives).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np

HAND_SIZES = (1, 2, 4, 5, 7, 8, 10, 11, 13, 14)
YAOCHU = (0, 8, 9, 17, 18, 26, 27, 28, 29, 30, 31, 32, 33)
GREEN = (19, 20, 21, 23, 25, 32)

# Kind pools that steer random hands toward the rarer yaku (flushes, terminals, greens...).
_THEMES = {
    "any": tuple(range(34)),
    "man": tuple(range(9)),
    "pin_honors": tuple(range(9, 18)) + tuple(range(27, 34)),
    "sou_honors": tuple(range(18, 27)) + tuple(range(27, 34)),
    "simples": tuple(k for k in range(27) if k % 9 not in (0, 8)),
    "yaochu": YAOCHU,
    "terminals_near": tuple(k for k in range(27) if k % 9 in (0, 1, 2, 6, 7, 8))
    + tuple(range(27, 34)),
    "honors": tuple(range(27, 34)),
    "winds_dragons": tuple(range(27, 34)) + tuple(range(0, 9)),
    "green": GREEN,
}
_THEME_WEIGHTS = {
    "any": 8,
    "man": 2,
    "pin_honors": 2,
    "sou_honors": 1,
    "simples": 2,
    "yaochu": 1,
    "terminals_near": 2,
    "honors": 1,
    "winds_dragons": 1,
    "green": 1,
}


def random_concealed_counts(rng: random.Random, n: int) -> np.ndarray:
    """34 counts of n random tiles; some hands are drawn from one or two suits (near-complete)."""
    if rng.random() < 0.5:
        ids = rng.sample(range(136), n)
    else:
        suits = rng.sample(range(4), rng.randrange(1, 3))
        pool = [
            k * 4 + c for s in suits for k in range(s * 9, min(s * 9 + 9, 34)) for c in range(4)
        ]
        ids = rng.sample(pool, n)
    counts = np.zeros(34, np.uint8)
    for t in ids:
        counts[t >> 2] += 1
    return counts


def near_complete_counts(rng: random.Random, n: int) -> np.ndarray:
    """A complete shape of n//3 groups + pair with 0-3 tiles swapped for random ones."""
    themes = list(_THEMES.values())
    while True:
        kinds = rng.choice(themes)
        tiles: list[int] = []
        for _ in range(n // 3):
            k = rng.choice(kinds)
            if (
                k < 27
                and k % 9 <= 6
                and (k + 1) in kinds
                and (k + 2) in kinds
                and rng.random() < 0.6
            ):
                tiles += [k, k + 1, k + 2]
            else:
                tiles += [k, k, k]
        tiles += [rng.choice(kinds)] * 2
        rng.shuffle(tiles)
        tiles = tiles[:n]
        for i in range(rng.randrange(0, 4)):
            tiles[i % n] = rng.randrange(34)
        counts = np.zeros(34, np.uint8)
        for k in tiles:
            counts[k] += 1
        if counts.max() <= 4:
            return counts


def _chi(k: int) -> tuple[str, list[int]]:
    return ("chi", [k, k + 1, k + 2])


def _pon(k: int) -> tuple[str, list[int]]:
    return ("pon", [k, k, k])


def _template(rng) -> list[tuple[str, list[int]]]:
    """Group sets for yaku that uniform groups rarely hit; the rest is filled at random."""
    suit = rng.randrange(3) * 9
    r = rng.randrange(0, 7)
    kind = rng.choice(
        ["sanshoku", "ittsu", "peiko", "outside", "winds", "dragons", "chuuren", "douko"]
    )
    if kind == "sanshoku":
        g = [_chi(r), _chi(9 + r), _chi(18 + r)]
    elif kind == "ittsu":
        g = [_chi(suit), _chi(suit + 3), _chi(suit + 6)]
    elif kind == "peiko":
        g = [_chi(suit + r), _chi(suit + r)]
        if rng.random() < 0.5:
            r2 = rng.randrange(0, 7)
            g += [_chi(suit + r2), _chi(suit + r2)]
    elif kind == "outside":
        g = [_chi(int(rng.choice([0, 6, 9, 15, 18, 24]))) for _ in range(rng.randrange(2, 4))]
        g.append(_pon(int(rng.choice(YAOCHU))))
    elif kind == "winds":
        g = [_pon(27 + w) for w in rng.sample(range(4), rng.randrange(3, 5))]
    elif kind == "dragons":
        g = [_pon(31 + d) for d in rng.sample(range(3), rng.randrange(2, 4))]
    elif kind == "douko":
        g = [_pon(r), _pon(9 + r), _pon(18 + r)]
    else:  # nine gates: 1112345678999 + one more of the suit, all concealed
        g = [
            (
                "chuuren",
                [suit] * 3
                + list(range(suit + 1, suit + 8))
                + [suit + 8] * 3
                + [suit + rng.randrange(0, 9)],
            )
        ]
        return g
    # Outside hands keep every group on a terminal/honor; dragon hands often pair a dragon.
    fill = (0, 6, 8, 9, 15, 17, 18, 24, 26) if kind == "outside" else tuple(range(34))
    if kind == "dragons" and len(g) == 2 and rng.random() < 0.6:
        p = 31 + int(rng.choice([d for d in range(3) if _pon(31 + d) not in g]))
        fill_pair = [p]
    else:
        fill_pair = [k for k in fill if kind != "outside" or k % 9 in (0, 8)]
    while len(g) < 4:
        k = int(rng.choice(fill))
        g.append(_chi(k) if k < 27 and k % 9 <= 6 and rng.random() < 0.6 else _pon(k))
    p = int(rng.choice(fill_pair))
    return g[:4] + [("pair", [p, p])]


@dataclass
class WinCase:
    """A winning hand with its conditions, in the arguments of meeple's score_hand."""

    closed: list[int]
    melds: list[tuple[str, list[int]]]
    win_tile: int
    flags: dict = field(default_factory=dict)


def _assign_ids(rng, kind_lists: list[list[int]], used: set[int]) -> list[list[int]]:
    """Distinct physical copies for each list of kinds."""
    out = []
    for kinds in kind_lists:
        ids = []
        for k in kinds:
            free = [k * 4 + c for c in range(4) if k * 4 + c not in used]
            t = int(rng.choice(free))
            used.add(t)
            ids.append(t)
        out.append(ids)
    return out


def random_win(rng: random.Random) -> WinCase:
    """A random complete hand (regular, seven pairs or thirteen orphans) and random conditions."""
    while True:
        case = _try_random_win(rng)
        if case is not None:
            return case


def _try_random_win(rng):
    form = rng.choices(["regular", "chiitoitsu", "kokushi"], weights=[0.86, 0.1, 0.04])[0]
    kinds = _THEMES[rng.choices(list(_THEME_WEIGHTS), weights=list(_THEME_WEIGHTS.values()))[0]]
    groups: list[tuple[str, list[int]]] = []
    chi_p = rng.choice([0.3, 0.6, 0.9])
    if form == "regular" and rng.random() < 0.2:
        groups = _template(rng)
    elif form == "regular":
        for _ in range(4):
            k = int(rng.choice(kinds))
            can_chi = k < 27 and k % 9 <= 6 and (k + 1) in kinds and (k + 2) in kinds
            if can_chi and rng.random() < chi_p:
                groups.append(("chi", [k, k + 1, k + 2]))
            else:
                groups.append(("pon", [k, k, k]))
        p = int(rng.choice(kinds))
        groups.append(("pair", [p, p]))
    elif form == "chiitoitsu":
        pool = kinds if len(kinds) >= 7 else tuple(range(34))
        for k in rng.sample(pool, 7):
            groups.append(("pair", [int(k), int(k)]))
    else:
        extra = int(rng.choice(YAOCHU))
        groups.append(("kokushi", sorted(list(YAOCHU) + [extra])))
    # Melds: some chi/pon groups become calls; pons may become kans.
    melds_k: list[tuple[str, list[int]]] = []
    closed_k: list[int] = []
    n_calls = int(rng.choice([0, 0, 0, 1, 2, 3, 4])) if form == "regular" else 0
    order = rng.sample(range(len(groups)), len(groups))
    for idx in order:
        kind, ks = groups[idx]
        if kind in ("chi", "pon") and len(melds_k) < n_calls:
            if kind == "pon" and rng.random() < 0.35:
                mtype = str(rng.choice(["daiminkan", "ankan", "kakan"]))
                melds_k.append((mtype, ks + [ks[0]]))
            else:
                melds_k.append((kind, ks))
        else:
            closed_k.extend(ks)
    all_kinds = closed_k + [k for _, ks in melds_k for k in ks]
    if max(all_kinds.count(k) for k in set(all_kinds)) > 4:
        return None
    used: set[int] = set()
    closed = _assign_ids(rng, [closed_k], used)[0]
    melds = [
        (t, ids) for (t, _), ids in zip(melds_k, _assign_ids(rng, [ks for _, ks in melds_k], used))
    ]
    win_tile = int(rng.choice(closed))
    opened = any(t != "ankan" for t, _ in melds)
    has_kan = any(t in ("daiminkan", "ankan", "kakan") for t, _ in melds)
    f: dict = {}
    f["tsumo"] = bool(rng.random() < 0.5)
    if not opened and rng.random() < 0.45:
        f["riichi"] = True
        f["double_riichi"] = bool(rng.random() < 0.15)
        f["ippatsu"] = bool(rng.random() < 0.3)
    if f["tsumo"]:
        f["rinshan"] = bool(has_kan and rng.random() < 0.3)
        f["haitei"] = bool(not f["rinshan"] and rng.random() < 0.06)
        if not melds and rng.random() < 0.03:
            f["tenhou" if rng.random() < 0.5 else "chiihou"] = True
    else:
        f["chankan"] = bool(rng.random() < 0.05)
        f["houtei"] = bool(not f["chankan"] and rng.random() < 0.06)
    f["seat_wind"] = rng.randrange(0, 4)
    f["round_wind"] = rng.randrange(0, 4)
    if f.get("tenhou"):
        f["seat_wind"] = 0
    if f.get("chiihou") and f["seat_wind"] == 0:
        f["seat_wind"] = rng.randrange(1, 4)
    free = [t for t in range(136) if t not in used]
    n_ind = rng.randrange(1, 6)
    ind = rng.sample(free, 2 * n_ind)
    f["dora_indicators"] = ind[:n_ind]
    f["ura_indicators"] = ind[n_ind:]
    f["honba"] = rng.randrange(0, 9) if rng.random() < 0.5 else 0
    f["riichi_sticks"] = rng.randrange(0, 5) if rng.random() < 0.5 else 0
    return WinCase(closed=closed, melds=melds, win_tile=win_tile, flags=f)
