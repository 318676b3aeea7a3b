"""Training samples from MJAI logs: every decision of every seat, replayed through the engine.

`log_games(path)` replays each game of a log with :class:`meeple_mahjong.mjai.Replayer` (the
same loop `mjai.replay` checks logs with) and records, whenever seats must act, one sample
per deciding seat, taken before anyone acts:

- ``obs``: the seat's 84x34 public planes (`encode_public`), ``mask``: its legal actions,
  ``action``: what the log did (a seat in a claims window that does not claim passes: 153);
- ``tenpai[i]``: opponent i (relative seat i+1: right, across, left) holds a tenpai
  concealed hand (shanten 0; oracle plane 9*i+5 of `encode_oracle`);
- ``danger[k]``: discarding kind k now would be a winning tile of at least one opponent that
  is tenpai and not furiten: k is among its winning kinds (oracle plane 9*i+6: kinds that
  complete its 3n+1 concealed tiles, never a 5th copy of a kind it holds all four of) and it
  is not furiten (oracle plane 9*i+7: one of its winning kinds is in its pond, was passed by
  since its last discard, or was passed by after its riichi). Yaku are not checked, so an
  open hand without a yaku still counts as a danger;
- ``rank`` / ``score``: the seat's final placement (0 = first, ties to the lower seat) and
  score, from the last complete hand when the log stops early.

A claim the log shows is taken; seats that could also have claimed are recorded as passing
(a log does not say what a seat that lost on priority wanted). What the engine does must
agree with the log: an illegal or different event ends the game's samples at the last
complete hand and is reported with its file and line (see `log_games`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from meeple_native import mahjong as _mj

from ..mjai import (
    LogGame,
    Replayer,
    ReplayError,
    explain,
    placements,
    read_lines,
    read_problem,
    split_games,
)

SAMPLE_FIELDS: dict[str, tuple[tuple[int, ...], np.dtype]] = {
    "obs": ((84, 34), np.float32),  # public planes from the native encoder (encode_public)
    "mask": ((155,), np.bool_),  # legal mask of the deciding seat (legal_mask)
    "action": ((), np.int16),  # action index taken (action_index), 153 = pass on a claim
    "seat": ((), np.int8),  # absolute seat that decided
    "hand": ((), np.int16),  # hand index within the game, 0-based
    "rank": ((), np.int8),  # final placement of that seat, 0 = first (ties: lower seat first)
    "score": ((), np.int32),  # final score of that seat
    "tenpai": ((3,), np.bool_),  # opponents (relative seats 1, 2, 3) tenpai at the decision
    "danger": ((34,), np.bool_),  # discarding this kind now deals in to some opponent
}

# Public planes 64-66: genbutsu against opponents 1-3 (own pond, passed since its last discard,
# passed after its riichi). A tenpai opponent is furiten exactly when a winning kind is among them.
_GENBUTSU = slice(64, 67)
_EYE = np.eye(34, dtype=np.uint8)


@dataclass
class LogProblem:
    """Something in a log that could not be used, with its file and 1-based line."""

    path: str
    line: int | None
    message: str

    def __str__(self) -> str:
        return (
            f"{self.path}:{self.line}: {self.message}"
            if self.line
            else f"{self.path}: {self.message}"
        )


@dataclass
class GameSamples:
    source: str  # file path
    game: int  # index of the game inside the file (0-based)
    line: int  # line of its start_game (or first event)
    names: list[str]  # the 4 player names (start_game.names; "0".."3" when absent)
    samples: dict[str, np.ndarray]  # every SAMPLE_FIELDS key, leading dimension N (N may be 0)
    hands: int  # complete hands replayed
    complete: bool  # False: the log ended mid-game (rank/score from the last complete hand)
    seat_stats: list[dict]  # per seat: name, rank, score, hands, wins, deal_ins, riichi, calls
    problems: list[str] = field(default_factory=list)  # "file:line: message" notes


class _Buffers:
    """Growable per-field arrays reused across the games of a file; samples are written in
    place (the encoders write straight into a row) and copied out once per game."""

    def __init__(self, capacity: int = 2048):
        self.n = 0
        self._alloc(capacity)

    def _alloc(self, capacity: int) -> None:
        self.capacity = capacity
        self.obs = np.empty((capacity, 84, 34), np.float32)
        self.mask = np.empty((capacity, 155), np.bool_)
        self.action = np.empty(capacity, np.int16)
        self.seat = np.empty(capacity, np.int8)
        self.hand = np.empty(capacity, np.int16)
        self.waits = np.empty((capacity, 3), np.int32)  # opponents' entries in _Waits

    def grow(self) -> None:
        old = self.obs, self.mask, self.action, self.seat, self.hand, self.waits
        self._alloc(2 * self.capacity)
        for new, arr in zip(
            (self.obs, self.mask, self.action, self.seat, self.hand, self.waits), old, strict=True
        ):
            new[: self.n] = arr[: self.n]


class _Waits:
    """Tenpai and winning kinds per concealed hand, computed once per distinct hand.

    The same quantities as the oracle planes (a test compares them on every sample), at a
    fraction of the cost: encode_oracle took 13.6 us per sample, about half of the whole
    extraction, while a hand changes only when its owner draws or calls.
    """

    def __init__(self):
        self.index: dict[tuple, int] = {}
        self.tenpai: list[bool] = []
        self.waits: list[np.ndarray] = []
        self.new_hand()

    def new_hand(self) -> None:
        self.last: list = [None] * 4  # per seat: its closed hand and entry at the previous look
        self.last_entry = [0] * 4

    def of(self, g, seat: int) -> int:
        """Entry of the seat's concealed hand and melds."""
        hand = g.hand(seat)
        melded: list[int] = []
        if len(hand) < 13:  # melds hold copies too: a kind held four times is no wait
            melded = [t for _, tiles in g.melds(seat) for t in tiles]
            key = (tuple(hand), tuple(melded))
        elif hand == self.last[seat]:  # most looks: the seat has not drawn since
            return self.last_entry[seat]
        else:
            key = tuple(hand)
        i = self.index.get(key)
        if i is None:
            i = self.index[key] = len(self.tenpai)
            counts = [0] * 34
            for t in hand:
                counts[t >> 2] += 1
            shanten = _mj.shanten(counts)
            waits = np.zeros(34, np.bool_)
            if len(hand) % 3 == 1 and shanten == 0:
                held = np.array(counts, np.uint8)
                for t in melded:
                    held[t >> 2] += 1
                free = np.flatnonzero(held < 4)
                batch = np.array(counts, np.uint8) + _EYE[free]
                waits[free] = _mj.shanten_batch(batch)[:, 0] == -1
            self.tenpai.append(shanten <= 0)
            self.waits.append(waits)
        self.last[seat], self.last_entry[seat] = hand, i
        return i


class _SampleReplayer(Replayer):
    def __init__(self, game: LogGame, rules: dict, buf: _Buffers):
        super().__init__(game, rules)
        self.buf = buf
        buf.n = 0
        self.rows = [0, 0, 0, 0]
        self.kept = 0  # samples of complete hands
        self.hand_scores: list[list[int]] = []
        self.hand_events = 0  # log events up to the end of the last complete hand
        self.hands_waits = _Waits()

    def on_decision(self, seats, masks) -> None:
        buf, g, of = self.buf, self.g, self.hands_waits.of
        if len(seats) == 1:  # own turn: the three others (the seat's own hand changes each turn)
            s = seats[0]
            w = [0] * 4
            for r in (1, 2, 3):
                w[(s + r) & 3] = of(g, (s + r) & 3)
        else:
            w = [of(g, x) for x in range(4)]
        for s in seats:
            r = buf.n
            if r == buf.capacity:
                buf.grow()
            _mj.encode_public(g, s, buf.obs[r])
            buf.waits[r] = w[(s + 1) & 3], w[(s + 2) & 3], w[(s + 3) & 3]
            buf.mask[r] = masks[s]
            buf.seat[r] = s
            buf.hand[r] = self.hands
            self.rows[s] = r
            buf.n = r + 1

    def on_action(self, seat: int, index: int) -> None:
        self.buf.action[self.rows[seat]] = index

    def on_hand_end(self) -> None:
        self.hands_waits.new_hand()
        self.kept = self.buf.n
        self.hand_scores.append(list(self.g.scores))
        self.hand_events = self.next_event


def _seat_stats(events, names, hands, ranks, scores) -> list[dict]:
    stats = [
        {"name": names[s], "rank": ranks[s], "score": scores[s], "hands": hands,
         "wins": 0, "deal_ins": 0, "riichi": 0, "calls": 0}
        for s in range(4)
    ]  # fmt: skip
    for _, ev, _ in events:
        t = ev["type"]
        if t == "hora":
            stats[ev["actor"]]["wins"] += 1
            if ev.get("target", ev["actor"]) != ev["actor"]:
                stats[ev["target"]]["deal_ins"] += 1
        elif t == "reach_accepted":
            stats[ev["actor"]]["riichi"] += 1
        elif t in ("chi", "pon", "daiminkan"):
            stats[ev["actor"]]["calls"] += 1
    return stats


def _opponent_targets(
    table: _Waits, ids: np.ndarray, obs: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """tenpai (N, 3) and danger (N, 34) from the opponents' hand entries (N, 3) and the
    deciders' public planes (N, 84, 34)."""
    if len(ids) == 0:
        return np.zeros((0, 3), np.bool_), np.zeros((0, 34), np.bool_)
    tenpai = np.asarray(table.tenpai, np.bool_)[ids]
    waits = np.stack(table.waits)[ids]  # (N, 3, 34)
    furiten = (waits & (obs[:, _GENBUTSU, :] > 0)).any(axis=2)
    danger = (waits & ~furiten[:, :, None]).any(axis=1)
    return tenpai, danger


def _game_samples(
    path: str, index: int, game: LogGame, rules: dict, buf: _Buffers
) -> Iterator[GameSamples | LogProblem]:
    rep = _SampleReplayer(game, rules, buf)
    problem = None
    try:
        scores = rep.run()
        kept, hands, complete, events = buf.n, rep.hands, True, rep.events
    except ReplayError as e:
        line, message = explain(e, game)
        problem = LogProblem(path, line, f"game {index}: {message}")
        kept, hands, complete = rep.kept, rep.hands, False
        scores = rep.hand_scores[-1] if rep.hand_scores else None
        events = rep.events[: rep.hand_events]
    except Exception as e:  # never raise for a log's content: report where it happened
        problem = LogProblem(
            path, game.line, f"game {index}: internal error: {type(e).__name__}: {e}"
        )
        kept, hands, complete, scores, events = 0, 0, False, None, []
    if problem is not None:
        yield problem
    if hands == 0:
        return
    names = game.names
    ranks = placements(scores)
    seat = buf.seat[:kept].copy()
    tenpai, danger = _opponent_targets(rep.hands_waits, buf.waits[:kept], buf.obs[:kept])
    samples = {
        "obs": buf.obs[:kept].copy(),
        "mask": buf.mask[:kept].copy(),
        "action": buf.action[:kept].copy(),
        "seat": seat,
        "hand": buf.hand[:kept].copy(),
        "rank": np.asarray(ranks, np.int8)[seat],
        "score": np.asarray(scores, np.int32)[seat],
        "tenpai": tenpai,
        "danger": danger,
    }
    yield GameSamples(
        source=path,
        game=index,
        line=game.line,
        names=names,
        samples=samples,
        hands=hands,
        complete=complete,
        seat_stats=_seat_stats(events, names, hands, ranks, scores),
        problems=[str(problem)] if problem else [],
    )


def log_games(path: str | Path, *, rules: dict | None = None) -> Iterator[GameSamples | LogProblem]:
    """Samples of every game of one MJAI log (any variant `meeple_mahjong.mjai` reads).

    Never raises for bad content. A game that replays to its end yields one complete
    :class:`GameSamples`. A game that stops early (the log ends mid-game, a malformed line,
    an event the engine finds illegal or different) yields a :class:`LogProblem` naming the
    file and line, then, when at least one hand completed, a `GameSamples` with
    ``complete=False`` holding those hands (the same problem in its ``problems``); reading
    goes on with the next game. A file that cannot be read yields one `LogProblem` with
    ``line=None``. `rules` are `Game` keyword options (the log's rules; default Tenhou).
    """
    rules = dict(rules or {})
    _mj.Game(**rules)  # bad rule options are the caller's error: raise here, not per game
    source = str(path)
    try:
        lines = read_lines(path)
    except (OSError, EOFError, UnicodeDecodeError) as e:
        yield LogProblem(source, None, read_problem(path, e))
        return
    games = split_games(lines)
    if not games:
        yield LogProblem(source, None, "no events (the log is empty)")
        return
    buf = _Buffers()
    for index, game in enumerate(games):
        yield from _game_samples(source, index, game, rules, buf)
