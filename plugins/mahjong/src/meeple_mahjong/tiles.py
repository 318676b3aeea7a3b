"""Tile notation: 34 kinds, 136 physical ids, MJAI strings and compact hand strings.

Kind k: 0-8 = 1m-9m, 9-17 = 1p-9p, 18-26 = 1s-9s, 27-33 = E S W N P F C.
Physical id: kind * 4 + copy; with red fives on, ids 16/52/88 are 5mr/5pr/5sr.
"""

from __future__ import annotations

from meeple_native import mahjong as _mj

kind_to_mjai = _mj.kind_to_mjai
tile_to_mjai = _mj.tile_to_mjai

_SUITS = {"m": 0, "p": 9, "s": 18, "z": 27}


def mjai_to_kind(s: str) -> int:
    """Kind of an MJAI tile string ('1m', '5pr', 'E', 'C'); ValueError lists the accepted forms."""
    return _mj.mjai_to_kind(s)[0]


def parse_counts(hand: str) -> list[int]:
    """34 counts of a compact hand string such as '123m406p11z' (0 = red five, z = honors 1-7)."""
    counts = [0] * 34
    digits: list[str] = []
    for ch in hand.replace(" ", ""):
        if ch.isdigit():
            digits.append(ch)
            continue
        if ch not in _SUITS or not digits:
            raise ValueError(
                f"bad hand string {hand!r}: expected digit groups followed by m, p, s or z (e.g. '123m11z')"
            )
        for d in digits:
            rank = 5 if d == "0" else int(d)
            if ch == "z" and (d == "0" or rank > 7):
                raise ValueError(f"bad tile {d}{ch} in {hand!r}: honors are 1z-7z (E S W N P F C)")
            counts[_SUITS[ch] + rank - 1] += 1
        digits = []
    if digits:
        raise ValueError(f"bad hand string {hand!r}: digits {''.join(digits)} have no suit letter")
    return counts
