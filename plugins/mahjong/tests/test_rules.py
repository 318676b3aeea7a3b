"""Rare rule paths driven by hand-built walls (Game.reset_with_walls)."""

import json

import meeple_mahjong as mj
from meeple_mahjong.testing import YAOCHU


def _wall(fixed: dict[int, int]) -> list[int]:
    """A wall with the given kinds at the given positions; other tiles in id order."""
    wall = [-1] * 136
    used = set()
    for pos, kind in fixed.items():
        tile = next(kind * 4 + c for c in (1, 2, 3, 0) if kind * 4 + c not in used)
        used.add(tile)
        wall[pos] = tile
    rest = iter(t for t in range(136) if t not in used)
    return [t if t >= 0 else next(rest) for t in wall]


def _tsumogiri_game(wall: list[int], **rules) -> list[dict]:
    """Everyone discards what they draw and never calls or wins; one hand."""
    g = mj.Game(**rules)
    g.reset_with_walls([wall])
    while g.hands_played == 0:
        seat = g.pending()[0]
        legal = g.legal_actions(seat)
        last = json.loads(g.events(g.event_count - 1)[0])
        drawn = [
            a
            for a in legal
            if a.type == "discard"
            and last["type"] == "tsumo"
            and mj.tile_to_mjai(a.tile) == last["pai"]
        ]
        g.step(seat, drawn[0] if drawn else next(a for a in legal if a.type == "pass"))
    return [json.loads(e) for e in g.events()]


def test_nagashi_mangan_is_paid_as_mangan_tsumo_without_honba():
    # Seat 1 (non-dealer) draws only terminals and honors; with tsumogiri everywhere none is called.
    yaochu = [k for k in YAOCHU for _ in range(4)]
    fixed = {52 + 4 * i + 1: yaochu[i] for i in range(18)}
    events = _tsumogiri_game(_wall(fixed))
    draw = next(e for e in events if e["type"] == "ryukyoku")
    assert draw["reason"] == "nagashimangan"
    assert draw["deltas"] == [-4000, 8000, -2000, -2000]  # the dealer pays 4000, the others 2000


def test_four_identical_winds_abort_the_hand():
    events = _tsumogiri_game(_wall({52: 27, 53: 27, 54: 27, 55: 27}))
    draw = next(e for e in events if e["type"] == "ryukyoku")
    assert draw["reason"] == "sufonrenda" and draw["deltas"] == [0, 0, 0, 0]
    assert sum(e["type"] == "dahai" for e in events) == 4
    # Dealer keeps the deal with one more honba.
    nxt = [e for e in events if e["type"] == "start_kyoku"][1]
    assert (nxt["oya"], nxt["honba"]) == (0, 1)
