"""The table as the viewer draws it, rebuilt from MJAI events: `Table.apply(event)` after each
event and `Table.state()` is the plain JSON `meeple_mahjong/viewer/renderer.js` reads.

Torch-free and engine-free: it reads any MJAI stream the replayer accepts (the engine's own,
or a converted Tenhou log). State keys (one entry per seat where a list has four):

- ``bakaze`` ``kyoku`` ``honba`` ``kyotaku`` ``oya``, ``scores`` (the players' names are the
  replay's, not repeated in every step);
- ``dora``: the dora indicators shown so far; ``wall``: tiles left to draw;
- ``hands``: each seat's concealed tiles, sorted, without ``drawn`` (the tile just drawn);
- ``rivers``: each seat's discards, ``{"pai", "riichi"?, "called"?, "tsumogiri"?}`` (flags only
  when true: the riichi tile lies sideways, a called tile left the river);
- ``melds``: ``{"type", "pai", "consumed", "target"?}`` per open or closed meld;
- ``riichi``: who has declared; ``last``: the event just applied (actor, type, pai);
- ``result``: after a ``hora`` or ``ryukyoku``, what happened (winner, payer, yaku, deltas).
"""

from __future__ import annotations

import copy
from typing import Any

_HONORS = "ESWNPFC"


def tile_key(tile: str) -> tuple[int, int]:
    """Sort key of an MJAI tile: man, pin, sou, then E S W N P F C; a red five before its plain copies."""
    if tile in _HONORS:
        return 27 + _HONORS.index(tile), 1
    if len(tile) >= 2 and tile[0].isdigit() and tile[1] in "mps":
        return "mps".index(tile[1]) * 9 + int(tile[0]) - 1, 0 if tile.endswith("r") else 1
    return 99, 0  # "?" (a hidden tile) and anything unknown sort last


def _remove(hand: list[str], tile: str) -> None:
    """Take ``tile`` out of a hand; a log may write a red five plainly, so fall back to its kind."""
    if tile in hand:
        hand.remove(tile)
        return
    kind = tile_key(tile)[0]
    for t in hand:
        if tile_key(t)[0] == kind:
            hand.remove(t)
            return
    if "?" in hand:
        hand.remove("?")


class Table:
    """Follows one game's MJAI events; `state()` is a fresh JSON-ready dict each call."""

    def __init__(self, names: list[str] | None = None) -> None:
        self.names = list(names or ["0", "1", "2", "3"])
        self.s: dict[str, Any] = {
            "bakaze": "E", "kyoku": 1, "honba": 0, "kyotaku": 0, "oya": 0,
            "scores": [25000] * 4, "dora": [], "wall": 0,
            "hands": [[] for _ in range(4)], "drawn": [None] * 4,
            "rivers": [[] for _ in range(4)], "melds": [[] for _ in range(4)],
            "riichi": [False] * 4, "last": None, "result": None,
        }  # fmt: skip
        self._declared = [False] * 4  # reach announced, its discard not yet made

    def state(self) -> dict[str, Any]:
        return copy.deepcopy(self.s)

    def apply(self, ev: dict[str, Any]) -> None:
        handler = getattr(self, "_" + str(ev.get("type")), None)
        if handler is not None:
            handler(ev)
        actor = ev.get("actor")
        self.s["last"] = {k: ev[k] for k in ("type", "actor", "pai") if k in ev} if ev.get("type") else None
        if actor is not None and ev.get("type") not in ("tsumo", "start_kyoku", "hora"):
            self._merge_drawn(actor)

    def _merge_drawn(self, seat: int) -> None:
        s = self.s
        if s["drawn"][seat] is not None:
            s["hands"][seat].append(s["drawn"][seat])
            s["drawn"][seat] = None
        s["hands"][seat].sort(key=tile_key)

    # -- events ----------------------------------------------------------------------------

    def _start_game(self, ev: dict) -> None:
        names = ev.get("names")
        if isinstance(names, list) and len(names) == 4:
            self.names = [str(n) for n in names]

    def _start_kyoku(self, ev: dict) -> None:
        s = self.s
        for k in ("bakaze", "kyoku", "honba", "kyotaku", "oya"):
            if k in ev:
                s[k] = ev[k]
        if "scores" in ev:
            s["scores"] = list(ev["scores"])
        s["hands"] = [sorted(h, key=tile_key) for h in ev["tehais"]]
        s["drawn"] = [None] * 4
        s["rivers"] = [[] for _ in range(4)]
        s["melds"] = [[] for _ in range(4)]
        s["riichi"] = [False] * 4
        s["dora"] = [ev["dora_marker"]]
        s["wall"] = 70  # 136 - 4 x 13 dealt - 14 in the dead wall
        s["result"] = None
        self._declared = [False] * 4

    def _tsumo(self, ev: dict) -> None:
        seat = ev["actor"]
        self._merge_drawn(seat)
        self.s["drawn"][seat] = ev["pai"]
        self.s["wall"] = max(0, self.s["wall"] - 1)

    def _dahai(self, ev: dict) -> None:
        s, seat, tile = self.s, ev["actor"], ev["pai"]
        if s["drawn"][seat] == tile or (ev.get("tsumogiri") and s["drawn"][seat] is not None):
            s["drawn"][seat] = None
        else:
            _remove(s["hands"][seat], tile)
        entry: dict[str, Any] = {"pai": tile}
        if ev.get("tsumogiri"):
            entry["tsumogiri"] = True
        if self._declared[seat]:
            entry["riichi"] = True
            self._declared[seat] = False
        s["rivers"][seat].append(entry)

    def _reach(self, ev: dict) -> None:
        self._declared[ev["actor"]] = True

    def _reach_accepted(self, ev: dict) -> None:
        self.s["riichi"][ev["actor"]] = True
        self.s["kyotaku"] += 1
        if "scores" in ev:
            self.s["scores"] = list(ev["scores"])

    def _call(self, ev: dict) -> None:
        s, seat = self.s, ev["actor"]
        for t in ev["consumed"]:
            _remove(s["hands"][seat], t)
        target = ev.get("target")
        river = s["rivers"][target] if target is not None else []
        if river:
            river[-1]["called"] = True
        s["melds"][seat].append({"type": ev["type"], "pai": ev["pai"], "consumed": list(ev["consumed"]),
                                 "target": target})  # fmt: skip

    _chi = _pon = _daiminkan = _call

    def _ankan(self, ev: dict) -> None:
        s, seat = self.s, ev["actor"]
        self._merge_drawn(seat)
        for t in ev["consumed"]:
            _remove(s["hands"][seat], t)
        s["melds"][seat].append({"type": "ankan", "pai": ev["consumed"][0], "consumed": list(ev["consumed"])})

    def _kakan(self, ev: dict) -> None:
        s, seat, tile = self.s, ev["actor"], ev["pai"]
        self._merge_drawn(seat)
        _remove(s["hands"][seat], tile)
        kind = tile_key(tile)[0]
        for m in s["melds"][seat]:
            if m["type"] == "pon" and tile_key(m["pai"])[0] == kind:
                m["type"] = "kakan"
                m["consumed"] = [*m["consumed"], tile]
                return
        s["melds"][seat].append({"type": "kakan", "pai": tile, "consumed": list(ev.get("consumed") or [])})

    def _dora(self, ev: dict) -> None:
        self.s["dora"].append(ev["dora_marker"])

    def _hora(self, ev: dict) -> None:
        s = self.s
        actor = ev["actor"]
        target = ev.get("target", actor)
        if "scores" in ev:
            s["scores"] = list(ev["scores"])
        s["kyotaku"] = 0
        result = {"type": "hora", "actor": actor, "target": target, "pai": ev.get("pai"),
                  "deltas": ev.get("deltas"), "tsumo": target == actor}  # fmt: skip
        for k in ("yakus", "fan", "fu", "hora_points"):
            if k in ev:
                result[k] = ev[k]
        ura = ev.get("uradora_markers", ev.get("ura_markers"))
        if ura:
            result["uradora"] = list(ura)
        prev = s["result"]  # a double ron: both wins stay on the table
        s["result"] = {"type": "hora", "wins": [*(prev or {}).get("wins", []), result]}

    def _ryukyoku(self, ev: dict) -> None:
        if "scores" in ev:
            self.s["scores"] = list(ev["scores"])
        self.s["result"] = {"type": "ryukyoku", "reason": ev.get("reason"), "deltas": ev.get("deltas"),
                            "tenpais": ev.get("tenpais")}  # fmt: skip

    def _end_game(self, ev: dict) -> None:
        if "scores" in ev:
            self.s["scores"] = list(ev["scores"])
