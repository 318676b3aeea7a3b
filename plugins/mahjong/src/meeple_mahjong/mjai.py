"""MJAI event logs: write the engine's stream, read any log and replay it through the engine.

A log is one JSON event per line (`.mjson`, optionally gzip-compressed `.mjson.gz`).
Replay rebuilds every hand's wall from the log itself (deal, draws, rinshan draws, dora
and ura indicators), replays each decision as an engine action (other seats pass), and
checks each event the engine then emits against the log. It stops at the first event
that is malformed, illegal or different from what the engine did, and reports its line.
Fields and event types it does not know are ignored.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from meeple_native import mahjong as _mj

_HONORS = "ESWNPFC"
_DECISIONS = {"dahai", "reach", "chi", "pon", "daiminkan", "ankan", "kakan", "hora"}
_KNOWN = _DECISIONS | {
    "start_game", "start_kyoku", "tsumo", "dora", "reach_accepted", "ryukyoku", "end_kyoku", "end_game",
}  # fmt: skip


def write_log(path: str | Path, events: Iterable[str], compress: bool | None = None) -> Path:
    """Write JSON event lines; gzip when `compress` or when the name ends in .gz."""
    path = Path(path)
    compress = path.suffix == ".gz" if compress is None else compress
    opener = gzip.open if compress else open
    with opener(path, "wt", encoding="utf-8") as f:
        for e in events:
            f.write(e if isinstance(e, str) else json.dumps(e, separators=(",", ":")))
            f.write("\n")
    return path


def read_lines(path: str | Path) -> list[str]:
    """Lines of a log, gzip detected from the file's magic bytes."""
    path = Path(path)
    with open(path, "rb") as f:
        magic = f.read(2)
    opener = gzip.open if magic == b"\x1f\x8b" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return f.read().splitlines()


@dataclass
class ReplayReport:
    ok: bool
    games: int = 0
    events: int = 0
    line: int | None = None  # 1-based line of the first problem
    message: str = ""
    final_scores: list[list[int]] = field(default_factory=list)

    def __str__(self) -> str:
        if self.ok:
            return f"ok: {self.games} game(s), {self.events} events replayed"
        if self.line is None:  # about the whole file (unreadable, empty)
            return self.message
        return f"line {self.line}: {self.message}"


class ReplayError(Exception):
    def __init__(self, line: int, message: str):
        super().__init__(message)
        self.line = line


def _kind_red(s: str, line: int) -> tuple[int, bool]:
    try:
        return _mj.mjai_to_kind(s)
    except (ValueError, TypeError) as e:
        raise ReplayError(line, f"bad tile {s!r}: {e}") from None


def _parse(lines: Iterable[str], skipped: list[tuple[int, str]]) -> Iterator[tuple[int, dict]]:
    """Known events with their line numbers; other types (chat, tool-specific notes) are skipped
    and noted in ``skipped`` so that an error right after one can be blamed on it."""
    for no, raw in enumerate(lines, 1):
        raw = raw.strip()
        if not raw:
            continue
        try:
            ev = json.loads(raw)
        except json.JSONDecodeError as e:
            # Some messages end in "at" ("Unterminated string starting at"): the column completes them.
            raise ReplayError(no, f"malformed JSON: {e.msg.removesuffix(' at')} at column {e.colno}") from None
        if not isinstance(ev, dict) or not isinstance(ev.get("type"), str):
            raise ReplayError(no, "an event must be a JSON object with a string 'type'")
        if ev["type"] in _KNOWN:
            yield no, ev
        else:
            skipped.append((no, ev["type"]))


class _WallBuilder:
    """Collects one hand's tiles from the log and lays them out in the engine's wall order."""

    def __init__(self, ev: dict, line: int):
        self.line = line
        self.oya = int(ev["oya"])
        self.tehais = ev["tehais"]
        self.dora = [ev["dora_marker"]]
        self.live: list[str] = []
        self.rinshan: list[str] = []
        self.ura: list[str] = []
        self.after_kan = False
        self.lines: dict[str, int] = {}

    def add(self, no: int, ev: dict) -> None:
        t = ev["type"]
        if t == "tsumo":
            (self.rinshan if self.after_kan else self.live).append(ev["pai"])
            self.after_kan = False
        elif t in ("daiminkan", "ankan", "kakan"):
            self.after_kan = True
        elif t == "dora":
            self.dora.append(ev["dora_marker"])
        elif t == "hora" and ev.get("uradora_markers"):
            self.ura = list(ev["uradora_markers"])

    def build(self, red_fives: bool) -> list[int]:
        slots: dict[int, str] = {}
        for i in range(4):
            hand = self.tehais[(self.oya + i) % 4]
            if len(hand) != 13:
                raise ReplayError(
                    self.line,
                    f"start_kyoku: tehais[{(self.oya + i) % 4}] has {len(hand)} tiles, expected 13",
                )
            for j, s in enumerate(hand):
                slots[13 * i + j] = s
        if len(self.live) > 70 or len(self.rinshan) > 4 or len(self.dora) > 5 or len(self.ura) > 5:
            raise ReplayError(
                self.line, "more draws, rinshan draws or indicators than a wall holds"
            )
        slots.update({52 + j: s for j, s in enumerate(self.live)})
        slots.update({122 + k: s for k, s in enumerate(self.rinshan)})
        slots.update({126 + i: s for i, s in enumerate(self.dora)})
        slots.update({131 + i: s for i, s in enumerate(self.ura)})
        free = {
            k: ([1, 2, 3, 0] if red_fives and k % 9 == 4 and k < 27 else [0, 1, 2, 3])
            for k in range(34)
        }
        wall = [-1] * 136
        for pos in sorted(slots):
            s = slots[pos]
            if s == "?":
                raise ReplayError(self.line, "the log hides tiles ('?'); replay needs every tile")
            kind, red = _kind_red(s, self.line)
            copies = free[kind]
            want = (
                0
                if red
                else next(
                    (
                        c
                        for c in copies
                        if not (red_fives and kind % 9 == 4 and kind < 27 and c == 0)
                    ),
                    None,
                )
            )
            if red and not red_fives:
                raise ReplayError(self.line, f"red five {s} in a log replayed without red fives")
            if want is None or want not in copies:
                raise ReplayError(self.line, f"this hand uses more copies of {s} than exist")
            copies.remove(want)
            wall[pos] = kind * 4 + want
        rest = iter(sorted(k * 4 + c for k in range(34) for c in free[k]))
        return [t if t >= 0 else next(rest) for t in wall]


def _walls(events: list[tuple[int, dict]], red_fives: bool) -> list[list[int]]:
    walls, cur = [], None
    for no, ev in events:
        if ev["type"] == "start_kyoku":
            try:
                cur = _WallBuilder(ev, no)
            except (KeyError, TypeError, ValueError):
                raise ReplayError(
                    no, "start_kyoku needs oya, tehais (4 x 13 tiles) and dora_marker"
                ) from None
        elif cur is not None:
            try:
                cur.add(no, ev)
            except (KeyError, TypeError):
                raise ReplayError(no, f"{ev['type']}: missing fields") from None
            if ev["type"] == "end_kyoku":
                walls.append(cur.build(red_fives))
                cur = None
    if cur is not None:
        walls.append(cur.build(red_fives))
    return walls


def _signature(type_: str, tile: str | None, consumed: Iterable[str]) -> tuple:
    return (type_, tile, tuple(sorted(consumed)))


def _action_signature(a, red_fives: bool) -> tuple:
    def name(t: int) -> str:
        return _mj.tile_to_mjai(t, red_fives)

    return _signature(a.type, name(a.tile) if a.tile >= 0 else None, [name(c) for c in a.consumed])


class _Replayer:
    def __init__(self, events: list[tuple[int, dict]], rules: dict):
        self.events = events
        self.rules = rules
        self.red = rules.get("red_fives", True)

    def run(self) -> list[int]:
        g = _mj.Game(**self.rules)
        g.reset_with_walls(_walls(self.events, self.red))
        self.g = g
        self.pos = 0
        i = 0
        while i < len(self.events):
            no, ev = self.events[i]
            t = ev["type"]
            if self.pos == g.event_count:
                if g.is_done():
                    raise ReplayError(no, f"{t}: the engine's game is already over")
                i = self._decide(i)
                continue
            self._compare(no, ev, json.loads(g.events(self.pos)[0]))
            self.pos += 1
            i += 1
        if self.pos != g.event_count or not g.is_done():
            last = self.events[-1][0] if self.events else 0
            raise ReplayError(last, "the log ends before the engine's game does")
        return list(g.scores)

    def _step(self, no: int, seat: int, sig: tuple, what: str) -> None:
        legal = self.g.legal_actions(seat)
        for a in legal:
            if _action_signature(a, self.red) == sig:
                self.g.step(seat, a)
                return
        shown = ", ".join(repr(a) for a in legal) or f"none (pending seats: {self.g.pending()})"
        raise ReplayError(no, f"illegal {what} by seat {seat}; legal: {shown}")

    def _pass_all(self) -> None:
        for seat in self.g.pending():
            if any(a.type == "pass" for a in self.g.legal_actions(seat)):
                self.g.step(seat, _mj.Action("pass"))

    def _decide(self, i: int) -> int:
        self._act(i)
        return i

    def _act(self, i: int) -> None:
        no, ev = self.events[i]
        t = ev["type"]
        # In a claims window the claim may come after events the engine emits on resolution
        # (reach_accepted, dora): act on the first event that is not one of those.
        k = i
        while k < len(self.events) and self.events[k][1]["type"] in ("reach_accepted", "dora"):
            k += 1
        claiming = any(
            a.type == "pass" for seat in self.g.pending() for a in self.g.legal_actions(seat)
        )
        if claiming and k < len(self.events) and k != i:
            no, ev = self.events[k]
            t = ev["type"]
            if t not in ("chi", "pon", "daiminkan") and not (
                t == "hora" and ev.get("actor") != ev.get("target")
            ):
                no, ev = self.events[i]
                t = ev["type"]
            else:
                i = k
        try:
            actor = int(ev.get("actor", -1))
        except (TypeError, ValueError):
            raise ReplayError(no, f"{t}: actor must be a seat number") from None
        try:
            if t == "hora" and actor != ev.get("target", actor):
                j = i
                while j < len(self.events) and self.events[j][1]["type"] == "hora":
                    h = self.events[j][1]
                    pai = self._canon(h["pai"], no)
                    self._step(
                        self.events[j][0], int(h["actor"]), _signature("ron", pai, []), "ron"
                    )
                    j += 1
                self._pass_all()
                return
            if t in ("chi", "pon", "daiminkan"):
                pai = self._canon(ev["pai"], no)
                cons = [self._canon(c, no) for c in ev["consumed"]]
                self._step(no, actor, _signature(t, pai, cons), t)
                self._pass_all()
                return
            self._pass_all()
            if self.pos < self.g.event_count:  # passing resolved something: compare it first
                return
            if t == "dahai":
                self._step(
                    no, actor, _signature("discard", self._canon(ev["pai"], no), []), "dahai"
                )
            elif t == "reach":
                nxt = next((e for _, e in self.events[i + 1 :] if e["type"] == "dahai"), None)
                if nxt is None or nxt.get("actor") != actor:
                    raise ReplayError(no, "reach must be followed by the same seat's dahai")
                self._step(
                    no, actor, _signature("riichi", self._canon(nxt["pai"], no), []), "reach"
                )
            elif t == "hora":
                self._step(
                    no, actor, _signature("tsumo", self._canon(ev["pai"], no), []), "tsumo hora"
                )
            elif t == "ankan":
                cons = sorted(self._canon(c, no) for c in ev["consumed"])
                legal = [a for a in self.g.legal_actions(actor) if a.type == "ankan"]
                match = [
                    a
                    for a in legal
                    if sorted(_mj.tile_to_mjai(x, self.red) for x in [a.tile, *a.consumed]) == cons
                ]
                if not match:
                    raise ReplayError(
                        no, f"illegal ankan by seat {actor}; legal: {legal or 'none'}"
                    )
                self.g.step(actor, match[0])
            elif t == "kakan":
                self._step(no, actor, _signature("kakan", self._canon(ev["pai"], no), []), "kakan")
            elif t == "ryukyoku" and ev.get("reason") in ("kyushukyuhai", "kyushu"):
                self._step(
                    no,
                    actor if actor >= 0 else self.g.pending()[0],
                    _signature("kyuushu", None, []),
                    "kyushukyuhai",
                )
            else:
                raise ReplayError(
                    no, f"the log has {t} but the engine expects seat(s) {self.g.pending()} to act"
                )
        except ReplayError:
            raise
        except (KeyError, TypeError) as e:
            raise ReplayError(no, f"{t}: missing or bad field {e}") from None
        except ValueError as e:
            raise ReplayError(no, f"illegal {t}: {e}") from None

    def _canon(self, s: str, no: int) -> str:
        kind, red = _kind_red(s, no)
        return _mj.kind_to_mjai(kind, red and self.red)

    def _compare(self, no: int, log: dict, eng: dict) -> None:
        t = log["type"]
        if eng["type"] != t:
            raise ReplayError(no, f"the log has {t} but the engine produced {json.dumps(eng)}")
        keys = {
            "tsumo": ("actor", "pai"),
            "dahai": ("actor", "pai"),
            "reach": ("actor",),
            "reach_accepted": ("actor", "scores"),
            "chi": ("actor", "target", "pai", "consumed"),
            "pon": ("actor", "target", "pai", "consumed"),
            "daiminkan": ("actor", "target", "pai", "consumed"),
            "kakan": ("actor", "pai", "consumed"),
            "ankan": ("actor", "consumed"),
            "dora": ("dora_marker",),
            "start_kyoku": (
                "bakaze",
                "kyoku",
                "honba",
                "kyotaku",
                "oya",
                "scores",
                "tehais",
                "dora_marker",
            ),
            "hora": ("actor", "target", "deltas", "scores"),
            "ryukyoku": ("deltas", "scores"),
            "end_game": ("scores",),
        }.get(t, ())
        for k in keys:
            if k not in log:
                continue
            a, b = log[k], eng.get(k)
            if k in ("consumed", "tehais"):
                a = [sorted(x) for x in a] if k == "tehais" else sorted(a)
                b = [sorted(x) for x in b] if k == "tehais" else sorted(b)
            if k in ("pai", "dora_marker", "consumed", "tehais"):
                a, b = self._canon_any(a, no), self._canon_any(b, no)
            if a != b:
                raise ReplayError(
                    no,
                    f"{t}.{k}: log has {json.dumps(log[k])}, the engine has {json.dumps(eng.get(k))}",
                )

    def _canon_any(self, x, no):
        if isinstance(x, list):
            return [self._canon_any(y, no) for y in x]
        return self._canon(x, no) if isinstance(x, str) else x


def replay(lines: Iterable[str], **rules) -> ReplayReport:
    """Replay every game of a log; stop at the first problem. `rules` are Game keyword options."""
    report = ReplayReport(ok=True)
    skipped: list[tuple[int, str]] = []
    events: list[tuple[int, dict]] = []
    try:
        events.extend(_parse(lines, skipped))
        if not events:
            return ReplayReport(ok=False, message="no events (the log is empty)")
        games: list[list[tuple[int, dict]]] = []
        for no, ev in events:
            if ev["type"] == "start_game" or not games:
                games.append([])
            games[-1].append((no, ev))
        for game in games:
            report.final_scores.append(_Replayer(game, rules).run())
            report.games += 1
            report.events += len(game)
    except ReplayError as e:
        line, message = _blame(e, events, skipped)
        return ReplayReport(
            ok=False, games=report.games, events=report.events, line=line, message=message
        )
    except Exception as e:  # never crash on a bad log: report where we were
        return ReplayReport(
            ok=False,
            games=report.games,
            line=None,
            message=f"internal error: {type(e).__name__}: {e}",
        )
    return report


def _blame(
    e: ReplayError, events: list[tuple[int, dict]], skipped: list[tuple[int, str]]
) -> tuple[int, str]:
    """An error right after skipped unknown events is most likely one of them (a typo'd type
    where the engine expected an event): name the first such event and its own line."""
    before = max((no for no, _ in events if no < e.line), default=0)
    suspects = [(no, t) for no, t in skipped if before < no < e.line]
    if not suspects:
        return e.line, str(e)
    no, t = suspects[0]
    return no, (
        f"unknown event type {t!r} (accepted: {', '.join(sorted(_KNOWN))}); "
        f"right after it, line {e.line}: {e}"
    )


def replay_file(path: str | Path, **rules) -> ReplayReport:
    """Like :func:`replay`; a file that cannot be read is one failed report saying why."""
    try:
        lines = read_lines(path)
    except FileNotFoundError:
        return ReplayReport(ok=False, message="file not found")
    except IsADirectoryError:
        return ReplayReport(ok=False, message="a directory, not a log file")
    except UnicodeDecodeError as e:
        return ReplayReport(
            ok=False, message=f"not UTF-8 text (byte {e.object[e.start]:#04x} at offset {e.start}); "
            "expected MJAI JSON lines, optionally gzip-compressed",
        )
    except (OSError, EOFError) as e:  # permissions, a truncated or corrupt gzip stream
        return ReplayReport(ok=False, message=f"cannot be read ({e})")
    return replay(lines, **rules)
