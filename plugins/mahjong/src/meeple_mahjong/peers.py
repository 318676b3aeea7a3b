"""Outside checks: re-score hands with the `mahjong` package (2.x) and compare with ours.

`mahjong` is a test/validation dependency (the `[test]` extra), imported here only.
Configured as our defaults: open tanyao and red fives on, Tenhou values otherwise.
"""

from __future__ import annotations

try:
    from mahjong.hand_calculating.hand import HandCalculator
    from mahjong.hand_calculating.hand_config import HandConfig, OptionalRules
    from mahjong.hand_calculating.yaku_config import YakuConfig
    from mahjong.meld import Meld
except ImportError as e:  # pragma: no cover - message for users without the extra
    raise ImportError(
        "meeple_mahjong.peers needs the `mahjong` package: pip install 'mahjong>=2.1,<3'"
    ) from e

from meeple_native import mahjong as _mj

from .testing import WinCase

_YAKU_NAMES = {v.name: k for k, v in vars(YakuConfig()).items()}
_MELD = {
    "chi": (Meld.CHI, True),
    "pon": (Meld.PON, True),
    "daiminkan": (Meld.KAN, True),
    "ankan": (Meld.KAN, False),
    "kakan": (Meld.SHOUMINKAN, True),
}
_RULES = {red: OptionalRules(has_open_tanyao=True, has_aka_dora=red) for red in (True, False)}
DORA_NAMES = ("dora", "aka_dora", "ura_dora")


def peer_score(case, red_fives: bool = True) -> dict:
    """The package's score of a WinCase, in the shape of our_score."""
    f = case.flags
    config = HandConfig(
        is_tsumo=f.get("tsumo", False),
        is_riichi=f.get("riichi", False),
        is_daburu_riichi=f.get("double_riichi", False),
        is_ippatsu=f.get("ippatsu", False),
        is_rinshan=f.get("rinshan", False),
        is_chankan=f.get("chankan", False),
        is_haitei=f.get("haitei", False),
        is_houtei=f.get("houtei", False),
        is_tenhou=f.get("tenhou", False),
        is_chiihou=f.get("chiihou", False),
        player_wind=27 + f["seat_wind"],
        round_wind=27 + f["round_wind"],
        tsumi_number=f["honba"],
        kyoutaku_number=f["riichi_sticks"],
        options=_RULES[red_fives],
    )
    melds = [
        Meld(meld_type=_MELD[t][0], tiles=sorted(ids), opened=_MELD[t][1]) for t, ids in case.melds
    ]
    tiles = list(case.closed) + [t for _, ids in case.melds for t in ids]
    r = HandCalculator.estimate_hand_value(
        tiles,
        case.win_tile,
        melds=melds,
        dora_indicators=f["dora_indicators"],
        ura_dora_indicators=f["ura_indicators"],
        config=config,
    )
    if r.error:
        return {"ok": False}
    c = r.cost
    dora = {_YAKU_NAMES[y.name]: y.han_closed for y in r.yaku if _YAKU_NAMES[y.name] in DORA_NAMES}
    return {
        "ok": True,
        "han": r.han,
        "fu": r.fu,
        "yaku": sorted(
            _YAKU_NAMES[y.name] for y in r.yaku if _YAKU_NAMES[y.name] not in DORA_NAMES
        ),
        "dora": (dora.get("dora", 0), dora.get("aka_dora", 0), dora.get("ura_dora", 0)),
        "pay": (
            c["main"],
            c["main_bonus"],
            c["additional"],
            c["additional_bonus"],
            c["kyoutaku_bonus"],
            c["total"],
        ),
    }


def our_score(case, red_fives: bool = True) -> dict:
    """Our score_hand in the same shape as peer_score."""
    r = _mj.score_hand(case.closed, case.melds, case.win_tile, red_fives=red_fives, **case.flags)
    if not r["ok"]:
        return {"ok": False}
    p = r["payment"]
    return {
        "ok": True,
        "han": r["han"],
        "fu": r["fu"],
        "yaku": sorted(name for name, _ in r["yaku"]),
        "dora": (r["dora"], r["aka"], r["ura"]),
        "pay": (
            p["main"],
            p["main_bonus"],
            p["additional"],
            p["additional_bonus"],
            p["kyoutaku_bonus"],
            p["total"],
        ),
    }


def peer_deltas(win: dict, red_fives: bool = True) -> tuple[dict, list[int]]:
    """Re-score one of Game.wins() with the package; return its score and the per-seat change it implies."""
    case = WinCase(
        closed=list(win["closed"]),
        melds=[(t, list(ids)) for t, ids in win["melds"]],
        win_tile=win["win_tile"],
        flags=dict(win["flags"]),
    )
    peer = peer_score(case, red_fives)
    deltas = [0, 0, 0, 0]
    if not peer["ok"]:
        return peer, deltas
    main, main_bonus, additional, additional_bonus, kyoutaku, _ = peer["pay"]
    winner, loser = win["winner"], win["loser"]
    dealer = (winner - win["flags"]["seat_wind"]) % 4
    if loser >= 0:
        deltas[loser] -= main + main_bonus
        deltas[winner] += main + main_bonus
    else:
        for seat in range(4):
            if seat != winner:
                pay = (
                    main + main_bonus
                    if seat == dealer and winner != dealer
                    else additional + additional_bonus
                )
                deltas[seat] -= pay
                deltas[winner] += pay
    deltas[winner] += kyoutaku
    liable = win.get("pao", -1)
    if liable >= 0:
        deltas = _pao_deltas(win, peer, liable, dealer)
    return peer, deltas


def _pao_deltas(win: dict, peer: dict, liable: int, dealer: int) -> list[int]:
    """Tenhou's pao split of the package's yakuman value (the split is our reading of the rule;
    the amounts come from the package)."""
    main, main_bonus, additional, additional_bonus, kyoutaku, total = peer["pay"]
    winner, loser = win["winner"], win["loser"]
    honba = win["flags"]["honba"]
    pao_yaku, han_p = next(
        (y, h) for y, h in win["result"]["yaku"] if y in ("daisangen", "daisuushi")
    )
    if pao_yaku not in peer["yaku"]:
        return [0, 0, 0, 0]  # the package does not see the pao yakuman: report a mismatch
    unit = 48000 if winner == dealer else 32000
    pao_value = unit * han_p // 13
    rest_value = (total - kyoutaku - 300 * honba) - pao_value  # the rest of the hand, no honba
    d = [0, 0, 0, 0]

    def pay(seat: int, amount: int) -> None:
        d[seat] -= amount
        d[winner] += amount

    if loser < 0:
        if rest_value:
            for seat in range(4):
                if seat != winner:
                    share = 2 if seat == dealer or winner == dealer else 1
                    pay(seat, rest_value * share // (6 if winner == dealer else 4))
        pay(liable, pao_value + 300 * honba)
    else:
        pay(liable, pao_value // 2)
        pay(loser, pao_value // 2 + rest_value + 300 * honba)
    d[winner] += kyoutaku
    return d
