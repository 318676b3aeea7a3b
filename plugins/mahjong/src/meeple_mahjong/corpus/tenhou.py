"""Tenhou JSON logs (the tenhou.net/6 `log` arrays) to MJAI events.

    python -m meeple_mahjong.corpus.tenhou game.json --out game.mjson

A Tenhou JSON game is ``{"name": [4 names], "rule": {...}, "log": [hand, hand, ...]}``;
each hand is a positional array:

    [[round, honba, riichi sticks], [4 scores], [dora indicators], [ura indicators],
     deal0, takes0, discards0, deal1, takes1, discards1, ..., deal3, takes3, discards3,
     result]

round 0-3 = East 1-4, 4-7 = South 1-4; seat 0 deals East 1 (MJAI seat 0). Tiles are
numbers: 11-19 man, 21-29 pin, 31-39 sou, 41-47 E S W N P F C, 51-53 red 5m/5p/5s.
*takes* are the seat's draws (numbers) and calls (strings: chi ``c``, pon ``p``, open kan
``m``); *discards* are numbers (60 = the tile just drawn), ``r``-prefixed for a riichi
declaration, strings for closed (``a``) and added (``k``) kans, and 0 where an open kan took
the discard's place. In a call string the letter stands before the claimed tile, and its
place says whom the tile came from: first = the left seat (kamicha), second = across,
last = the right seat. The result is ``["和了", deltas, [winner, from, liable, ...], ...]``
(one deltas/info pair per winner) or a draw name (``流局``, ``九種九牌``, ...) with deltas.

The MJAI stream is in the order the engine writes it: a closed kan's dora right after the
kan, an open kan's after the kan player's discard, ``reach_accepted`` once a riichi discard
is not ronned. Replay needs whole games from East 1 (the engine starts every game there),
and the rules of the table (`rule.aka` = 0: no red fives; an East-only game) are passed to
the corpus reader, not stored in MJAI.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from ..mjai import write_log

TSUMOGIRI = 60
_SUITS = "mps"
_HONORS = "ESWNPFC"
_DRAWS = {  # Tenhou's draw names -> MJAI ryukyoku reasons
    "流局": "fanpai", "全員聴牌": "fanpai", "全員不聴": "fanpai", "流し満貫": "nagashimangan",
    "九種九牌": "kyushukyuhai", "四風連打": "sufonrenda", "四家立直": "suchareach",
    "四槓散了": "sukaikan", "三家和了": "sanchaho",
}  # fmt: skip


class TenhouError(ValueError):
    """A Tenhou log that cannot be converted: says which hand and what is wrong."""


def tile(code) -> str:
    """MJAI name of a Tenhou tile number (51-53 are the red fives)."""
    if type(code) is int:
        if 51 <= code <= 53:
            return f"5{_SUITS[code - 51]}r"
        suit, n = divmod(code, 10)
        if 1 <= suit <= 3 and 1 <= n <= 9:
            return f"{n}{_SUITS[suit - 1]}"
        if suit == 4 and 1 <= n <= 7:
            return _HONORS[n - 1]
    raise TenhouError(f"bad tile {code!r}: expected 11-19, 21-29, 31-39, 41-47 or 51-53")


@dataclass
class Call:
    """A call string: its letter, the marked tile, the other tiles and the marked one's place."""

    kind: str  # c chi, p pon, m open kan, a closed kan, k added kan
    tile: int  # the claimed tile (c, p, m), the added one (k), one of the four (a)
    others: list[int]
    place: int  # how many tiles stand before the marked one


def parse_call(s: str) -> Call:
    """``"c275226"`` -> Call("c", 27, [52, 26], 0); ``"4545p45"`` -> Call("p", 45, [45, 45], 2)."""
    letters = [ch for ch in s if ch.isalpha()]
    if len(letters) != 1 or letters[0] not in "cpmak":
        raise TenhouError(
            f"bad call {s!r}: expected one of the letters c, p, m, a, k among tile numbers"
        )
    i = s.index(letters[0])
    digits = s[:i] + s[i + 1 :]
    if len(digits) % 2 or not digits.isdigit() or i % 2:
        raise TenhouError(f"bad call {s!r}: tiles are two-digit numbers")
    tiles = [int(digits[j : j + 2]) for j in range(0, len(digits), 2)]
    want = 3 if letters[0] in "cp" else 4
    if len(tiles) != want:
        raise TenhouError(f"bad call {s!r}: a {letters[0]} call has {want} tiles")
    place = i // 2
    return Call(letters[0], tiles[place], tiles[:place] + tiles[place + 1 :], place)


def _source(actor: int, call: Call) -> int:
    """Seat the claimed tile came from."""
    if call.kind == "c" or call.place == 0:
        return (actor + 3) % 4  # left
    if call.place == 1:
        return (actor + 2) % 4  # across
    return (actor + 1) % 4  # right: last of three (pon) or of four (open kan)


def _plain(code: int) -> int:
    return {51: 15, 52: 25, 53: 35}.get(code, code)


class _Hand:
    """Walks one hand's per-seat streams in table order and writes its MJAI events."""

    def __init__(self, hand: list, index: int):
        self.index = index
        if not isinstance(hand, list) or len(hand) < 16:
            raise TenhouError(
                f"hand {index}: expected a list of at least 16 entries, got {str(hand)[:60]}"
            )
        head, self.scores, self.dora, self.ura = hand[0], hand[1], hand[2], hand[3]
        self.round, self.honba, self.sticks = head[0], head[1], head[2]
        self.deals = [hand[4 + 3 * s] for s in range(4)]
        self.takes = [list(hand[5 + 3 * s]) for s in range(4)]
        self.discards = [list(hand[6 + 3 * s]) for s in range(4)]
        self.result = hand[16] if len(hand) > 16 else None
        self.ti = [0, 0, 0, 0]
        self.di = [0, 0, 0, 0]
        self.events: list[dict] = []
        self.dora_shown = 1
        self.drawn: list = [None] * 4

    def fail(self, message: str) -> TenhouError:
        return TenhouError(
            f"hand {self.index} ({'ESWN'[self.round // 4 % 4]}{self.round % 4 + 1}): {message}"
        )

    def emit(self, type_: str, **fields) -> None:
        self.events.append({"type": type_, **fields})

    def show_dora(self) -> None:
        if self.dora_shown >= len(self.dora):
            raise self.fail("a kan without its dora indicator in the dora list")
        self.emit("dora", dora_marker=tile(self.dora[self.dora_shown]))
        self.dora_shown += 1

    def next_take(self, seat: int):
        return self.takes[seat][self.ti[seat]] if self.ti[seat] < len(self.takes[seat]) else None

    def convert(self) -> list[dict]:
        oya = self.round % 4
        self.emit(
            "start_kyoku", bakaze="ESWN"[self.round // 4 % 4], kyoku=oya + 1, honba=self.honba,
            kyotaku=self.sticks, oya=oya, scores=list(self.scores),
            tehais=[[tile(t) for t in deal] for deal in self.deals], dora_marker=tile(self.dora[0]),
        )  # fmt: skip
        actor, draw, open_kan = oya, True, False
        offered = None  # the last tile another seat could ron: (seat, tile number)
        while True:
            if draw:
                t = self.next_take(actor)
                if t is None:
                    break  # nothing more to draw: the hand ended on the last discard
                if not isinstance(t, int):
                    raise self.fail(f"seat {actor} calls {t!r} where it should draw")
                self.ti[actor] += 1
                self.drawn[actor] = t
                self.emit("tsumo", actor=actor, pai=tile(t))
            if self.di[actor] >= len(self.discards[actor]):
                break  # a tsumo win or nine terminals: no discard
            d = self.discards[actor][self.di[actor]]
            self.di[actor] += 1
            if isinstance(d, str) and d[0] != "r":  # closed or added kan, then a rinshan draw
                call = parse_call(d)
                if call.kind == "a":
                    tiles = sorted([call.tile, *call.others], key=_plain)
                    self.emit("ankan", actor=actor, consumed=[tile(x) for x in tiles])
                    if open_kan:
                        self.show_dora()
                    self.show_dora()
                    open_kan = False
                elif call.kind == "k":
                    self.emit(
                        "kakan",
                        actor=actor,
                        pai=tile(call.tile),
                        consumed=[tile(x) for x in call.others],
                    )
                    if open_kan:
                        self.show_dora()
                    open_kan = True
                    offered = (actor, call.tile)
                else:
                    raise self.fail(f"seat {actor} discards a {call.kind} call {d!r}")
                draw = True
                continue
            riichi = isinstance(d, str)
            code = int(d[1:]) if riichi else d
            if code == TSUMOGIRI:
                code = self.drawn[actor]
                if code is None:
                    raise self.fail(f"seat {actor} discards its drawn tile (60) without a draw")
            if riichi:
                self.emit("reach", actor=actor)
            self.emit(
                "dahai", actor=actor, pai=tile(code), tsumogiri=d in (TSUMOGIRI, f"r{TSUMOGIRI}")
            )
            self.drawn[actor] = None
            offered = (actor, code)
            if open_kan:
                self.show_dora()
                open_kan = False
            claimer = self._claimer(actor, code)
            if riichi and not (claimer is None and self._ends_here(actor) and self._ron()):
                self.emit("reach_accepted", actor=actor)
            if claimer is None:
                actor, draw = (actor + 1) % 4, True
                continue
            call = parse_call(self.takes[claimer][self.ti[claimer]])
            self.ti[claimer] += 1
            name = {"c": "chi", "p": "pon", "m": "daiminkan"}[call.kind]
            self.emit(
                name,
                actor=claimer,
                target=actor,
                pai=tile(call.tile),
                consumed=[tile(x) for x in call.others],
            )
            actor = claimer
            draw = call.kind == "m"
            if draw:  # the open kan stands in the discard stream as 0
                if (
                    self.di[actor] < len(self.discards[actor])
                    and self.discards[actor][self.di[actor]] == 0
                ):
                    self.di[actor] += 1
                open_kan = True
        self._result(actor, offered)
        self.emit("end_kyoku")
        return self.events

    def _claimer(self, actor: int, code: int) -> int | None:
        """The seat whose next take is a call on this discard (pon/kan before chi)."""
        found = []
        for r in (1, 2, 3):
            s = (actor + r) % 4
            t = self.next_take(s)
            if isinstance(t, str):
                call = parse_call(t)
                if call.kind in "cpm" and call.tile == code and _source(s, call) == actor:
                    found.append((call.kind == "c", s))
        return min(found)[1] if found else None

    def _ends_here(self, actor: int) -> bool:
        return self.next_take((actor + 1) % 4) is None

    def _ron(self) -> bool:
        r = self.result
        return (
            isinstance(r, list)
            and r
            and r[0] == "和了"
            and any(
                info[0] != info[1] for info in r[2::2] if isinstance(info, list) and len(info) >= 2
            )
        )

    def _result(self, actor: int, offered) -> None:
        r = self.result
        if not isinstance(r, list) or not r:
            raise self.fail(f"no result at the end of the hand: {r!r}")
        ura = [tile(t) for t in self.ura]
        if r[0] == "和了":
            pairs = r[1:]
            if len(pairs) < 2 or len(pairs) % 2:
                raise self.fail(f"和了 needs deltas and winner info pairs, got {str(r)[:80]}")
            for deltas, info in zip(pairs[::2], pairs[1::2], strict=True):
                who, frm = int(info[0]), int(info[1])
                if who == frm:
                    pai = self.drawn[who]
                else:
                    if offered is None or offered[0] != frm:
                        raise self.fail(
                            f"seat {who} rons seat {frm}, but the last tile offered came from {offered}"
                        )
                    pai = offered[1]
                if pai is None:
                    raise self.fail(f"cannot tell seat {who}'s winning tile")
                self.emit(
                    "hora",
                    actor=who,
                    target=frm,
                    pai=tile(pai),
                    deltas=list(deltas),
                    ura_markers=ura,
                )
            return
        if r[0] not in _DRAWS:
            raise self.fail(f"unknown result {r[0]!r} (accepted: 和了, {', '.join(_DRAWS)})")
        deltas = list(r[1]) if len(r) > 1 and isinstance(r[1], list) else [0, 0, 0, 0]
        fields = {"actor": actor} if r[0] == "九種九牌" else {}
        self.emit("ryukyoku", reason=_DRAWS[r[0]], deltas=deltas, **fields)


def to_mjai(game: dict) -> list[dict]:
    """MJAI events of one Tenhou JSON game (a dict with "log", optionally "name")."""
    if not isinstance(game, dict) or not isinstance(game.get("log"), list):
        raise TenhouError('expected a JSON object with a "log" list of hands (tenhou.net/6 format)')
    names = game.get("name")
    if not (isinstance(names, list) and len(names) == 4):
        names = ["0", "1", "2", "3"]
    events = [{"type": "start_game", "names": [str(n) for n in names]}]
    for i, hand in enumerate(game["log"]):
        try:
            events += _Hand(hand, i).convert()
        except TenhouError:
            raise
        except (IndexError, KeyError, TypeError, ValueError) as e:
            raise TenhouError(f"hand {i}: malformed ({type(e).__name__}: {e})") from None
    events.append({"type": "end_game"})
    return events


def convert_file(src: str | Path, out: str | Path) -> Path:
    """Write the MJAI log of a Tenhou JSON file (gzip when `out` ends in .gz)."""
    game = json.loads(Path(src).read_text(encoding="utf-8"))
    return write_log(out, to_mjai(game))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m meeple_mahjong.corpus.tenhou", description=__doc__.splitlines()[0]
    )
    p.add_argument("logs", nargs="+", type=Path, help="Tenhou JSON files (tenhou.net/6 format)")
    p.add_argument("--out", type=Path, required=True,
                   help="output .mjson[.gz] for one input, or a directory for several")  # fmt: skip
    a = p.parse_args(argv)
    failed = 0
    for src in a.logs:
        dst = a.out if len(a.logs) == 1 and a.out.suffix else a.out / (src.stem + ".mjson")
        dst.parent.mkdir(parents=True, exist_ok=True)
        try:
            convert_file(src, dst)
            print(f"{src} -> {dst}")
        except (OSError, ValueError) as e:  # TenhouError and json.JSONDecodeError are ValueErrors
            print(f"{src}: {e}")
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
