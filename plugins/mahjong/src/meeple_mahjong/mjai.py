"""MJAI event logs: write the engine's stream, read any log and replay it through the engine.

A log is one JSON event per line (`.mjson`, `.json`, `.jsonl`, any of them gzip-compressed;
gzip is detected from the bytes, not the name). Replay rebuilds every hand's wall from the
log itself (deal, draws, rinshan draws, dora and ura indicators), turns each decision into
an engine action (other claimants pass), and checks each event the engine then emits
against the log. It stops at the first event that is malformed, illegal or different from
what the engine did, and reports its line.

Variants other writers produce are accepted: `hora` without `pai` (the winning tile is the
one drawn or on offer), `ura_markers` for `uradora_markers`, logs without `end_kyoku` /
`end_game`, extra fields (yaku names in any language, tool metadata) and event types it
does not know (skipped).

:class:`Replayer` is the one replay loop; :func:`replay` checks logs with it and
`meeple_mahjong.corpus.samples` subclasses it to record every decision (its hooks).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from meeple_native import mahjong as _mj

try:  # 5-7x faster than json on event lines; tensordict already depends on it
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - orjson missing
    _fast_loads = json.loads

_DECISIONS = {"dahai", "reach", "chi", "pon", "daiminkan", "ankan", "kakan", "hora"}
_KNOWN = _DECISIONS | {
    "start_game", "start_kyoku", "tsumo", "dora", "reach_accepted", "ryukyoku", "end_kyoku", "end_game",
}  # fmt: skip
_KYUSHU = {
    "kyushukyuhai",
    "kyushu",
    "kyuushu",
    "kyuushukyuuhai",
    "kyuushu_kyuuhai",
    "kyushu_kyuhai",
}

# Action indices (docs/mahjong_encoding.md "Action space").
RIICHI, CHI, PON, DAIMINKAN, ANKAN, KAKAN = 37, 74, 80, 82, 83, 117
TSUMO, RON, PASS, KYUSHU = 151, 152, 153, 154
_PASS_ACTION = _mj.Action("pass")
_END_KYOKU = '{"type":"end_kyoku"'  # how the engine writes it: its hand boundaries

# MJAI tile name -> (kind, red).
_TILES: dict[str, tuple[int, bool]] = {_mj.kind_to_mjai(k, False): (k, False) for k in range(34)}
_TILES.update({f"5{s}r": (k, True) for s, k in (("m", 4), ("p", 13), ("s", 22))})


def placements(scores: Iterable[int]) -> list[int]:
    """Each seat's final placement (0 = first) from the four scores; ties go to the lower seat
    (the seat nearer the first dealer), as the engine ranks."""
    scores = list(scores)
    order = sorted(range(4), key=lambda s: (-scores[s], s))
    rank = [0] * 4
    for r, s in enumerate(order):
        rank[s] = r
    return rank


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


def read_problem(path: str | Path, e: Exception) -> str:
    """Why a log file could not be read, in words (for exceptions of :func:`read_lines`)."""
    if isinstance(e, FileNotFoundError):
        return "file not found"
    if isinstance(e, IsADirectoryError):
        return "a directory, not a log file"
    if isinstance(e, UnicodeDecodeError):
        return (
            f"not UTF-8 text (byte {e.object[e.start]:#04x} at offset {e.start}); "
            "expected MJAI JSON lines, optionally gzip-compressed"
        )
    return f"cannot be read ({e})"  # permissions, a truncated or corrupt gzip stream


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


class _LogEnded(ReplayError):
    """The events ran out where the game needs more: replaced by the reason they ran out."""


@dataclass
class LogGame:
    """One game's events: (line, event, raw line) from its start_game up to the next one."""

    line: int  # line of its start_game (or first event)
    events: list[tuple[int, dict, str]] = field(default_factory=list)
    skipped: list[tuple[int, str]] = field(default_factory=list)  # unknown event types
    error: ReplayError | None = None  # first unreadable line; the game's events stop before it

    @property
    def names(self) -> list[str]:
        first = self.events[0][1] if self.events else {}
        names = first.get("names") if first.get("type") == "start_game" else None
        if isinstance(names, list) and len(names) == 4:
            return [str(n) for n in names]
        return ["0", "1", "2", "3"]


def split_games(lines: Iterable[str]) -> list[LogGame]:
    """Parse event lines and cut them into games at each start_game. A malformed line ends its
    game's events (noted in ``error``); the next start_game starts a fresh game."""
    games: list[LogGame] = []
    cur: LogGame | None = None
    for no, raw in enumerate(lines, 1):
        raw = raw.strip()
        if not raw:
            continue
        err = None
        try:
            ev = _fast_loads(raw)
        except ValueError:
            try:  # json's message reads better, and it accepts what orjson refuses (NaN)
                ev = json.loads(raw)
            except json.JSONDecodeError as e:
                # Some messages end in "at" ("Unterminated string starting at"): the column completes them.
                msg = e.msg.removesuffix(" at")
                err = ReplayError(no, f"malformed JSON: {msg} at column {e.colno}")
        if err is None and (not isinstance(ev, dict) or not isinstance(ev.get("type"), str)):
            err = ReplayError(no, "an event must be a JSON object with a string 'type'")
        if err is None and (ev["type"] == "start_game" or cur is None):
            cur = LogGame(no)
            games.append(cur)
        elif cur is None:
            cur = LogGame(no)
            games.append(cur)
        if err is not None:
            cur.error = cur.error or err
        elif cur.error is None:
            if ev["type"] in _KNOWN:
                cur.events.append((no, ev, raw))
            else:
                cur.skipped.append((no, ev["type"]))
    return games


def _kind_red(s, line: int) -> tuple[int, bool]:
    try:
        return _TILES[s]
    except (KeyError, TypeError):
        raise ReplayError(
            line, f"bad tile {s!r}: expected 1m-9m, 1p-9p, 1s-9s, 5mr/5pr/5sr, or E S W N P F C"
        ) from None


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
        elif t == "hora":
            ura = ev.get("uradora_markers", ev.get("ura_markers"))
            if ura:
                self.ura = list(ura)

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


def _walls(
    events: list[tuple[int, dict, str]], red_fives: bool
) -> tuple[list[list[int]], ReplayError | None, int]:
    """Every hand's wall; on a hand whose wall cannot be built: the walls before it, the
    error, and the index of that hand's start_kyoku (replay stops there)."""
    walls: list[list[int]] = []
    cur, start = None, 0

    def close() -> None:
        walls.append(cur.build(red_fives))

    try:
        for idx, (no, ev, _) in enumerate(events):
            t = ev["type"]
            if t == "start_kyoku":
                if cur is not None:  # a hand without end_kyoku
                    close()
                start = idx
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
                    raise ReplayError(no, f"{t}: missing fields") from None
                if t == "end_kyoku":
                    close()
                    cur = None
        if cur is not None:
            close()
    except ReplayError as e:
        return walls, e, start
    return walls, None, len(events)


class Replayer:
    """Replays one game of a log through the engine and checks it.

    `run()` returns the final scores or raises :class:`ReplayError` at the first bad line.
    Subclasses observe the replay through three hooks (no-ops here):
    `on_decision(seats, masks)` when seats must act (masks: seat -> legal mask over the 155
    actions, before anyone acts), `on_action(seat, index)` just before each seat's action is
    applied (every seat of `seats` acts once, 153 = pass), `on_hand_end()` after the engine's
    end of a hand matched the log. `self.g` is the engine game, `self.hands` the complete
    hands so far, `self.next_event` (in `on_hand_end`) the index in `self.events` of the
    first event after the hand.
    """

    def __init__(self, game: LogGame, rules: dict | None = None):
        self.game = game
        self.rules = dict(rules or {})
        self.red = self.rules.get("red_fives", True)
        self.events = game.events
        self.hands = 0
        self.next_event = 0
        self.g = None

    def on_decision(self, seats: list[int], masks: dict) -> None:
        pass

    def on_action(self, seat: int, index: int) -> None:
        pass

    def on_hand_end(self) -> None:
        pass

    def run(self) -> list[int]:
        walls, wall_error, cut = _walls(self.events, self.red)
        if wall_error is not None:
            self.events = self.events[:cut]
            if not walls:
                raise wall_error
        events, n = self.events, len(self.events)
        g = self.g = _mj.Game(**self.rules)
        g.reset_with_walls(walls)
        pos = i = 0
        try:
            while i < n:
                if pos == g.event_count:
                    no, ev, _ = events[i]
                    if g.is_done():
                        raise ReplayError(no, f"{ev['type']}: the engine's game is already over")
                    self._decide(i)
                    continue
                for eng in g.events(pos):
                    if i == n:
                        break
                    no, ev, raw = events[i]
                    # Logs written by this engine match byte for byte: parse only when they differ.
                    matched = raw == eng or self._compare(no, ev, _fast_loads(eng))
                    pos += 1
                    i += matched
                    if eng.startswith(_END_KYOKU):
                        self.hands += 1
                        self.next_event = i
                        self.on_hand_end()
            for eng in g.events(pos):  # end_kyoku / end_game the log leaves out
                if not eng.startswith(('{"type":"end_kyoku"', '{"type":"end_game"')):
                    break
                pos += 1
                if eng.startswith(_END_KYOKU):
                    self.hands += 1
                    self.next_event = i
                    self.on_hand_end()
            if pos != g.event_count or not g.is_done():
                last = events[-1][0] if events else self.game.line
                raise _LogEnded(last, "the log ends before the engine's game does")
        except _LogEnded as e:
            raise wall_error or self.game.error or e from None
        if wall_error is not None:
            raise wall_error
        return list(g.scores)

    # -- decisions ---------------------------------------------------------------------------

    def _decide(self, i: int) -> None:
        g = self.g
        no, ev, _ = self.events[i]
        t = ev["type"]
        seats = g.pending()
        masks = {s: _mj.legal_mask(g, s) for s in seats}
        self.on_decision(seats, masks)
        try:
            if masks[seats[0]][PASS]:
                self._claims(i, seats, masks)
            else:
                self._own_turn(i, seats, masks)
        except ReplayError:
            raise
        except (KeyError, TypeError, IndexError) as e:
            raise ReplayError(no, f"{t}: missing or bad field {e}") from None
        except ValueError as e:
            raise ReplayError(no, f"illegal {t}: {e}") from None

    def _claims(self, i: int, seats: list[int], masks: dict) -> None:
        """A claims window. The claim may come after events the engine emits only once the
        window resolves (reach_accepted, dora): look past those for it; no claim = all pass."""
        events, n = self.events, len(self.events)
        k = i
        while k < n and events[k][1]["type"] in ("reach_accepted", "dora"):
            k += 1
        claimed = []
        if k < n:
            no, ev, _ = events[k]
            t = ev["type"]
            if t in ("chi", "pon", "daiminkan"):
                claimed.append(self._actor(no, ev))
                self._take(no, claimed[-1], self._call_index(no, ev), t, masks)
            elif t == "hora" and ev.get("actor") != ev.get("target", ev.get("actor")):
                while k < n and events[k][1]["type"] == "hora":  # double (triple) ron
                    no, ev, _ = events[k]
                    claimed.append(self._actor(no, ev))
                    self._take(no, claimed[-1], RON, "ron", masks)
                    k += 1
        # The window resolves once every seat in it has answered: the others pass.
        for seat in seats:
            if seat not in claimed:
                self.on_action(seat, PASS)
                self.g.step(seat, _PASS_ACTION)

    def _own_turn(self, i: int, seats: list[int], masks: dict) -> None:
        no, ev, _ = self.events[i]
        t = ev["type"]
        if t == "ryukyoku" and ev.get("reason") in _KYUSHU:
            actor = self._actor(no, ev) if "actor" in ev else seats[0]
            self._take(no, actor, KYUSHU, "kyushukyuhai", masks)
            return
        if t not in ("dahai", "reach", "hora", "ankan", "kakan"):
            raise ReplayError(no, f"the log has {t} but the engine expects seat(s) {seats} to act")
        actor = self._actor(no, ev)
        if t == "dahai":
            self._take(no, actor, self._class(ev["pai"], no), "dahai", masks)
        elif t == "reach":
            nxt = next((e for _, e, _ in self.events[i + 1 :] if e["type"] == "dahai"), None)
            if nxt is None:
                raise _LogEnded(no, "reach must be followed by the same seat's dahai")
            if nxt.get("actor") != actor:
                raise ReplayError(no, "reach must be followed by the same seat's dahai")
            self._take(no, actor, RIICHI + self._class(nxt["pai"], no), "reach", masks)
        elif t == "hora":
            self._take(no, actor, TSUMO, "tsumo hora", masks)
        elif t == "ankan":
            cons = ev["consumed"]
            if not isinstance(cons, list) or len(cons) != 4:
                raise ReplayError(no, f"ankan: consumed must list 4 tiles, got {cons!r}")
            self._take(no, actor, ANKAN + _kind_red(cons[0], no)[0], "ankan", masks)
        else:
            self._take(no, actor, KAKAN + _kind_red(ev["pai"], no)[0], "kakan", masks)

    def _take(self, no: int, seat: int, index: int, what: str, masks: dict) -> None:
        mask = masks.get(seat)
        if mask is None or not mask[index]:
            legal = self.g.legal_actions(seat) if mask is not None else []
            shown = ", ".join(repr(a) for a in legal) or f"none (pending seats: {self.g.pending()})"
            raise ReplayError(no, f"illegal {what} by seat {seat}; legal: {shown}")
        action = _mj.action_from_index(self.g, seat, index)
        self.on_action(seat, index)
        self.g.step(seat, action)

    def _actor(self, no: int, ev: dict) -> int:
        actor = ev.get("actor")
        if type(actor) is not int or not 0 <= actor < 4:
            raise ReplayError(no, f"{ev['type']}: actor must be a seat number 0-3, got {actor!r}")
        return actor

    def _class(self, s, no: int) -> int:
        """Discard class of a tile: its kind, or 34-36 for a red five (docs/mahjong_encoding.md)."""
        kind, red = _kind_red(s, no)
        return 34 + kind // 9 if red and self.red else kind

    def _call_index(self, no: int, ev: dict) -> int:
        t = ev["type"]
        kind, _ = _kind_red(ev["pai"], no)
        cons = ev["consumed"]
        want = 3 if t == "daiminkan" else 2
        if not isinstance(cons, list) or len(cons) != want:
            raise ReplayError(no, f"{t}: consumed must list {want} tiles, got {cons!r}")
        own = [_kind_red(c, no) for c in cons]
        red = int(self.red and any(r for _, r in own))
        if t == "daiminkan":
            return DAIMINKAN
        if t == "pon":
            return PON + red
        below = sum(k < kind for k, _ in own)  # 0, 1, 2: the called tile is lowest/middle/highest
        return CHI + 2 * below + red

    # -- comparing the engine's events with the log's ------------------------------------------

    def _canon(self, s, no: int) -> str:
        kind, red = _kind_red(s, no)
        return _mj.kind_to_mjai(kind, red and self.red)

    def _compare(self, no: int, log: dict, eng: dict) -> bool:
        """True when the log's event matches the engine's; False for an engine end_kyoku the log
        leaves out (the log goes on with the next hand); ReplayError otherwise."""
        t = log["type"]
        if eng["type"] != t:
            if eng["type"] == "end_kyoku" and t in ("start_kyoku", "end_game"):
                return False
            if t == "end_game" and eng["type"] == "start_kyoku":
                nxt = f"{eng.get('bakaze')}{eng.get('kyoku')}, honba {eng.get('honba')}"
                raise ReplayError(
                    no,
                    f"the log ends the game, but under these rules it goes on ({nxt} next): "
                    "a log of a few hands, or rules other than the log's (e.g. east_only)",
                )
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
            ),  # fmt: skip
            "hora": ("actor", "target", "pai", "deltas", "scores"),
            "ryukyoku": ("deltas", "scores"),
            "end_game": ("scores",),
        }.get(t, ())
        for k in keys:
            if k not in log:
                continue
            a, b = log[k], eng.get(k)
            try:
                if k in ("consumed", "tehais"):
                    a = [sorted(x) for x in a] if k == "tehais" else sorted(a)
                    b = [sorted(x) for x in b] if k == "tehais" else sorted(b)
                if k in ("pai", "dora_marker", "consumed", "tehais"):
                    a, b = self._canon_any(a, no), self._canon_any(b, no)
            except TypeError:  # junk where tiles belong (a number, a dict)
                raise ReplayError(no, f"{t}.{k}: not a tile or list of tiles: {log[k]!r}") from None
            if a != b:
                raise ReplayError(
                    no,
                    f"{t}.{k}: log has {json.dumps(log[k])}, the engine has {json.dumps(eng.get(k))}",
                )
        return True

    def _canon_any(self, x, no):
        if isinstance(x, list):
            return [self._canon_any(y, no) for y in x]
        return self._canon(x, no) if isinstance(x, str) else x


def replay(lines: Iterable[str], **rules) -> ReplayReport:
    """Replay every game of a log; stop at the first problem. `rules` are Game keyword options."""
    report = ReplayReport(ok=True)
    games: list[LogGame] = []
    game = None
    try:
        games = split_games(lines)
        if not any(g.events for g in games) and not any(g.error for g in games):
            return ReplayReport(ok=False, message="no events (the log is empty)")
        for game in games:
            report.final_scores.append(Replayer(game, rules).run())
            report.games += 1
            report.events += len(game.events)
    except ReplayError as e:
        line, message = explain(e, game)
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


def explain(e: ReplayError, game: LogGame | None) -> tuple[int, str]:
    """An error right after skipped unknown events is most likely one of them (a typo'd type
    where the engine expected an event): name the first such event and its own line."""
    if game is None:
        return e.line, str(e)
    before = max((no for no, _, _ in game.events if no < e.line), default=0)
    suspects = [(no, t) for no, t in game.skipped if before < no < e.line]
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
    except (OSError, EOFError, UnicodeDecodeError) as e:
        return ReplayReport(ok=False, message=read_problem(path, e))
    return replay(lines, **rules)
