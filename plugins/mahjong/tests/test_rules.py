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


def _deal(hands: list[str], draws: list[str]) -> list[int]:
    """A wall dealing `hands` (seat 0 = dealer first) and then the live draws `draws`."""
    fixed = {}
    for seat, hand in enumerate(hands):
        counts = mj.parse_counts(hand)
        kinds = [k for k in range(34) for _ in range(counts[k])]
        assert len(kinds) == 13, hand
        fixed.update({13 * seat + j: k for j, k in enumerate(kinds)})
    for j, t in enumerate(draws):
        fixed[52 + j] = mj.mjai_to_kind(t)
    return _wall(fixed)


# Seats 1-3 each wait on 5p alone (tanki, tanyao); the dealer discards 5p at once.
_THREE_WAIT = [
    "19m19s1234567z77z5p",
    "234m456m678s678p5p",
    "345s456s777m222p5p",
    "678m456s222s333p5p",
]


def _first_discard_5p(**rules) -> list[dict]:
    hands = list(_THREE_WAIT)
    hands[0] = "19m19s123456z77z5p"  # 13 tiles: junk + the 5p
    g = mj.Game(**rules)
    g.reset_with_walls([_deal(hands, ["9p"])])
    g.step(
        0,
        next(
            a for a in g.legal_actions(0) if a.type == "discard" and mj.tile_to_mjai(a.tile) == "5p"
        ),
    )
    for seat in g.pending():
        g.step(seat, next(a for a in g.legal_actions(seat) if a.type == "ron"))
    return [json.loads(e) for e in g.events()]


def test_triple_ron_aborts_or_pays_or_head_bumps():
    events = _first_discard_5p()
    assert [e["reason"] for e in events if e["type"] == "ryukyoku"][:1] == ["sanchaho"]
    events = _first_discard_5p(triple_ron_abort=False)
    winners = [e["actor"] for e in events if e["type"] == "hora"][:3]
    assert winners == [1, 2, 3]
    events = _first_discard_5p(double_ron=False, triple_ron_abort=False)
    horas = [e for e in events if e["type"] == "hora"]
    assert horas[0]["actor"] == 1 and (len(horas) == 1 or horas[1]["type"] != "hora")
    assert [e["type"] for e in events].count("hora") == 1 or events[events.index(horas[0]) + 1][
        "type"
    ] != "hora"


def test_four_riichi_abort_keeps_the_sticks_on_the_table():
    hands = ["123m456m789m11p23p", "123s456s789s11m23s", "456p789p999s55m67m", "234s567s888p33m45m"]
    g = mj.Game()
    g.reset_with_walls([_deal(hands, ["E", "S", "W", "N"])])
    for seat, wind in enumerate("ESWN"):
        assert g.pending() == [seat]
        riichi = [
            a
            for a in g.legal_actions(seat)
            if a.type == "riichi" and mj.tile_to_mjai(a.tile) == wind
        ]
        assert riichi, (seat, g.legal_actions(seat))
        g.step(seat, riichi[0])
    events = [json.loads(e) for e in g.events()]
    assert sum(e["type"] == "reach_accepted" for e in events) == 4
    draw = next(e for e in events if e["type"] == "ryukyoku")
    assert draw["reason"] == "suuchariichi" and draw["scores"] == [24000] * 4
    nxt = [e for e in events if e["type"] == "start_kyoku"][1]
    assert (nxt["oya"], nxt["honba"], nxt["kyotaku"]) == (0, 1, 4)


def _pao_game(nine_pin_at: int, **rules):
    """Seat 1 pons the dealer's three dragons (the dealer is liable), then waits on 9p alone."""
    hands = [
        "19m19s1234z567z28s",
        "234m567p9p567z567z",
        "1m1p2p3p4p5p6p7p8p2s3s4s5s",
        "6s7s8s9s2m3m4m5m6m7m8m1p1p",
    ]
    wall = _deal(hands, [])
    # Put a 9p at `nine_pin_at` by swapping it with whatever is there.
    pos = next(i for i in range(52, 136) if wall[i] // 4 == 17)
    wall[pos], wall[nine_pin_at] = wall[nine_pin_at], wall[pos]
    g = mj.Game(**rules)
    g.reset_with_walls([wall])
    plan_1 = iter(["5p", "6p", "7p"])
    while g.hands_played == 0:
        seat = g.pending()[0]
        legal = g.legal_actions(seat)
        kinds = {a.type: a for a in legal}
        last = json.loads(g.events(g.event_count - 1)[0])
        if "ron" in kinds or "tsumo" in kinds:
            a = kinds.get("ron") or kinds["tsumo"]
        elif seat == 1 and "pon" in kinds:
            a = kinds["pon"]
        elif seat == 1 and last["type"] == "pon":
            want = next(plan_1)
            a = next(x for x in legal if x.type == "discard" and mj.tile_to_mjai(x.tile) == want)
        elif seat == 0 and any(
            x.type == "discard" and mj.tile_to_mjai(x.tile) in "PFC" for x in legal
        ):
            a = next(x for x in legal if x.type == "discard" and mj.tile_to_mjai(x.tile) in "PFC")
        elif "pass" in kinds:
            a = kinds["pass"]
        else:
            a = next(
                x for x in legal if x.type == "discard" and mj.tile_to_mjai(x.tile) == last["pai"]
            )
        g.step(seat, a)
    (win,) = g.wins()
    return win


def test_pao_for_big_three_dragons():
    from meeple_mahjong.peers import peer_deltas

    tsumo = _pao_game(62)  # seat 1 draws the 9p
    assert (tsumo["loser"], tsumo["pao"]) == (-1, 0) and tsumo["deltas"] == [-32000, 32000, 0, 0]
    ron = _pao_game(63)  # seat 2 draws and discards it
    assert (ron["loser"], ron["pao"]) == (2, 0) and ron["deltas"] == [-16000, 32000, -16000, 0]
    liable_deals_in = _pao_game(61)  # the liable dealer discards it: an ordinary ron
    assert liable_deals_in["pao"] == -1 and liable_deals_in["deltas"] == [-32000, 32000, 0, 0]
    plain = _pao_game(62, pao=False)
    assert plain["pao"] == -1 and plain["deltas"] == [-16000, 32000, -8000, -8000]
    for win in (tsumo, ron, liable_deals_in, plain):
        peer, deltas = peer_deltas(win)
        assert "daisangen" in peer["yaku"] and deltas == list(win["deltas"])
