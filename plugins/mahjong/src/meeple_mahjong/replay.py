"""A mahjong game as a viewer `Replay` (meeple.viewer), with a policy's view of chosen seats' decisions.

`review_game` replays one game of an MJAI log through the engine with
:class:`meeple_mahjong.mjai.Replayer` (the loop `mjai.replay` checks logs with and
`meeple_mahjong.corpus.samples` records training samples with): at each decision of a
reviewed seat its hook encodes the seat's observation and keeps the legal mask, the action the
log played, and where in the engine's event stream the decision fell. The policy then scores
all those decisions in batches (`PolicyHeads`: probabilities and value), and the engine's own
event stream becomes the steps: one per event, the table drawn by `viewer.table.Table`.

A decision whose played action is the next event (a discard, a call, a win) is annotated on that
event's step; one that the next event does not show (a pass in a claims window, a second seat
deciding at the same moment) gets a step of its own with the same table. Decisions with a single
legal action (the forced discard after riichi) are not decisions and are left out.

Decision kinds (for the agreement statistics): ``win`` (a tsumo or ron is legal), ``call`` (a
claims window on another seat's discard, or a closed/added kan played or legal), ``riichi`` (a
riichi declaration is legal), ``discard`` (every other own-turn choice).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from meeple.viewer.replay import Choice, Decision, Replay, Step
from meeple_native import mahjong as _mj

from .mjai import (
    ANKAN,
    CHI,
    DAIMINKAN,
    KAKAN,
    KYUSHU,
    PASS,
    PON,
    RIICHI,
    RON,
    TSUMO,
    LogGame,
    Replayer,
    placements,
    split_games,
)  # fmt: skip
from .viewer.table import Table, tile_key

GAME = "mahjong"
TOP = 5  # actions listed per decision
KINDS = ("discard", "riichi", "call", "win")
DISAGREE = "disagree"
_BATCH = 256


def _class_tile(c: int) -> str:
    """Tile of a discard class: kind 0-33, or 34-36 for the red 5m/5p/5s."""
    return _mj.kind_to_mjai(4 + 9 * (c - 34), True) if c >= 34 else _mj.kind_to_mjai(c, False)


def index_label(index: int, action: Any = None) -> str:
    """Readable MJAI-style name of action ``index`` (docs/mahjong_encoding.md, "Action space");
    a call names its tiles when the engine's ``action`` (`action_from_index`) is given."""
    if index < RIICHI:
        return f"discard {_class_tile(index)}"
    if index < CHI:
        return f"riichi {_class_tile(index - RIICHI)}"
    if index <= DAIMINKAN:
        kind = "chi" if index < PON else "pon" if index < DAIMINKAN else "daiminkan"
        if action is None:
            return kind
        return call_label(kind, _mj.tile_to_mjai(action.tile), [_mj.tile_to_mjai(t) for t in action.consumed])
    if index < KAKAN:
        return f"ankan {_mj.kind_to_mjai(index - ANKAN, False)}"
    if index < TSUMO:
        return f"kakan {_mj.kind_to_mjai(index - KAKAN, False)}"
    return {TSUMO: "tsumo", RON: "ron", PASS: "pass", KYUSHU: "kyushu kyuhai"}[index]


def call_label(kind: str, pai: str, consumed: Iterable[str]) -> str:
    """``chi 3m (4m 5mr)``: the called tile, then the seat's own tiles in hand order."""
    return f"{kind} {pai} ({' '.join(sorted(consumed, key=tile_key))})"


def event_label(ev: dict[str, Any]) -> str:
    """What an event does, in the words `index_label` uses for decisions."""
    t = ev.get("type")
    if t == "dahai":
        return f"discard {ev['pai']}"
    if t == "tsumo":
        return f"draw {ev['pai']}"
    if t in ("chi", "pon", "daiminkan"):
        return call_label(t, ev["pai"], ev["consumed"])
    if t == "ankan":
        return f"ankan {ev['consumed'][0]}"
    if t == "kakan":
        return f"kakan {ev['pai']}"
    if t == "reach":
        return "riichi"
    if t == "hora":
        return "tsumo" if ev.get("target", ev.get("actor")) == ev.get("actor") else "ron"
    if t == "dora":
        return f"dora indicator {ev['dora_marker']}"
    if t == "start_kyoku":
        return f"deal {ev.get('bakaze')}{ev.get('kyoku')}"
    return str(t).replace("_", " ")


def decision_kind(mask: np.ndarray, played: int) -> str:
    """Which agreement statistic a decision counts in (the module doc lists the kinds)."""
    if mask[TSUMO] or mask[RON]:
        return "win"
    if mask[PASS] or ANKAN <= played < TSUMO or mask[ANKAN:TSUMO].any():
        return "call"
    if mask[RIICHI:CHI].any():
        return "riichi"
    return "discard"


@dataclass
class SeatDecision:
    """One decision of a reviewed seat: where it fell, what it saw and what it played."""

    pos: int  # engine events emitted before it
    seat: int
    obs: np.ndarray
    mask: np.ndarray
    oracle: np.ndarray | None
    labels: dict[int, str]  # legal index -> label
    played: int = -1
    probs: np.ndarray | None = None
    value: float | None = None
    kind: str = ""

    @property
    def top(self) -> int:
        return int(np.argmax(self.probs))

    @property
    def agree(self) -> bool:
        return self.top == self.played


class _DecisionReplayer(Replayer):
    """Records the decisions of ``seats`` (observations from the engine's own encoders)."""

    def __init__(self, game: LogGame, rules: dict, seats: Sequence[int], oracle: bool):
        super().__init__(game, rules)
        self.seats = set(seats)
        self.oracle = oracle
        self.decisions: list[SeatDecision] = []
        self._open: dict[int, SeatDecision] = {}

    def on_decision(self, seats, masks) -> None:
        g = self.g
        self._open = {}
        for s in seats:
            mask = np.asarray(masks[s], dtype=np.bool_)
            if s not in self.seats or mask.sum() < 2:
                continue
            legal = np.flatnonzero(mask)
            labels = {int(i): index_label(int(i), _mj.action_from_index(g, s, int(i)) if CHI <= i <= DAIMINKAN else None)
                      for i in legal}  # fmt: skip
            d = SeatDecision(g.event_count, s, _mj.encode_public(g, s), mask.copy(),
                             _mj.encode_oracle(g, s) if self.oracle else None, labels)  # fmt: skip
            self._open[s] = d
            self.decisions.append(d)

    def on_action(self, seat: int, index: int) -> None:
        d = self._open.get(seat)
        if d is not None:
            d.played = int(index)
            d.kind = decision_kind(d.mask, d.played)


Scorer = Callable[..., tuple[torch.Tensor, torch.Tensor | None]]  # PolicyHeads' call


def score(decisions: list[SeatDecision], heads: Scorer) -> None:
    """Fill each decision's probabilities and value from ``heads`` (`policy.PolicyHeads`), in batches."""
    oracle = bool(getattr(heads, "oracle", False))
    for start in range(0, len(decisions), _BATCH):
        part = decisions[start : start + _BATCH]
        obs = torch.from_numpy(np.stack([d.obs for d in part]))
        mask = torch.from_numpy(np.stack([d.mask for d in part]))
        planes = torch.from_numpy(np.stack([d.oracle for d in part])) if oracle else None
        probs, values = heads(obs, mask, planes) if oracle else heads(obs, mask)
        for k, d in enumerate(part):
            d.probs = probs[k].numpy()
            d.value = None if values is None else float(values[k])


def agreement(decisions: Sequence[SeatDecision]) -> dict[str, Any]:
    """How often the policy's top action is the one played, overall and per decision kind, and
    the mean probability the policy gave the played action."""

    def stats(ds: Sequence[SeatDecision]) -> dict[str, Any]:
        n = len(ds)
        agree = sum(d.agree for d in ds)
        return {"decisions": n, "agree": agree, "agreement": agree / n if n else None,
                "mean_p_played": float(np.mean([d.probs[d.played] for d in ds])) if n else None}  # fmt: skip

    out = {"all": stats(decisions)}
    for kind in KINDS:
        out[kind] = stats([d for d in decisions if d.kind == kind])
    return out


def _decision(d: SeatDecision, top: int) -> Decision:
    order = np.argsort(-d.probs, kind="stable")[:top]
    choices = [Choice(d.labels[int(i)], float(d.probs[i])) for i in order if d.mask[i]]
    if d.played not in order[: len(choices)]:  # the played action always shows
        choices.append(Choice(d.labels[d.played], float(d.probs[d.played])))
    return Decision(top=choices, value=d.value)


def _decision_step(d: SeatDecision, state: dict, top: int) -> Step:
    marks = [] if d.agree else [DISAGREE]
    note = f"{d.kind}: played {d.labels[d.played]}, policy {d.labels[d.top]}"
    return Step(state=state, actor=d.seat, action=d.labels[d.played], decision=_decision(d, top),
                marks=marks, note=note)  # fmt: skip


def _matches(d: SeatDecision, ev: dict | None) -> bool:
    """Whether the next event shows this decision's action (then the two share a step)."""
    if ev is None or d.played == PASS:
        return False
    if d.played == KYUSHU:
        return ev.get("type") == "ryukyoku"
    return ev.get("actor") == d.seat


def build_steps(events: Sequence[dict], decisions: Sequence[SeatDecision], names: list[str], *,
                top: int = TOP, pov: int | None = None) -> list[Step]:  # fmt: skip
    """One step per event (the table after it), decision steps where a reviewed seat decided."""
    at: dict[int, list[SeatDecision]] = {}
    for d in decisions:
        at.setdefault(d.pos, []).append(d)
    table = Table(names)
    steps: list[Step] = []
    last_decision: dict[int, Step] = {}
    for i, ev in enumerate(events):
        t = ev.get("type")
        if t != "start_game":  # the names are the log's, not the engine's
            table.apply(ev)
        if t in ("start_game", "end_kyoku", "end_game") and not at.get(i + 1):  # nothing new to draw
            if t == "end_game" and steps:
                steps[-1].state["scores"] = table.s["scores"]
            continue
        state = table.state()
        state["pov"] = pov
        nxt = events[i + 1] if i + 1 < len(events) else None
        marks, note = [], ""
        if ev.get("type") == "hora":
            marks.append("win")
            win = state["result"]["wins"][-1]
            if not win["tsumo"]:
                marks.append("deal-in")
                note = f"{names[win['target']]} deals in to {names[win['actor']]}"
                dealt = last_decision.get(win["target"])
                if dealt is not None and "deal-in" not in dealt.marks:
                    dealt.marks.append("deal-in")
            else:
                note = f"{names[win['actor']]} wins by tsumo"
        elif ev.get("type") == "ryukyoku":
            note = f"draw ({ev.get('reason', 'exhaustive')})"
        merged = None
        for d in at.get(i + 1, []):  # decisions taken with the table as it is after event i
            if merged is None and _matches(d, nxt):
                merged = d
                continue
            steps.append(_decision_step(d, state, top))
            last_decision[d.seat] = steps[-1]
        if merged is not None:
            step = _decision_step(merged, state, top)
            step.marks += marks
        else:
            step = Step(state=state, actor=nxt.get("actor") if nxt else None,
                        action=event_label(nxt) if nxt else None, marks=marks, note=note)  # fmt: skip
        if merged is not None:
            last_decision[merged.seat] = step
        steps.append(step)
    return steps


class ReviewError(Exception):
    """A log that cannot be reviewed: its line (or None) and why."""

    def __init__(self, message: str, line: int | None = None):
        super().__init__(message)
        self.line = line


def review_game(game: LogGame, heads: Scorer | None, seats: Sequence[int], *, rules: dict | None = None,
                title: str = "", top: int = TOP) -> Replay:  # fmt: skip
    """The game as a Replay with the decisions of ``seats`` annotated by ``heads`` (None: the
    game alone, no decisions). Raises `mjai.ReplayError` when the log does not replay."""
    rep = _DecisionReplayer(game, dict(rules or {}), seats if heads is not None else (),
                            bool(getattr(heads, "oracle", False)))  # fmt: skip
    rep.run()
    decisions = rep.decisions
    if heads is not None and decisions:
        score(decisions, heads)
    events = [json.loads(e) for e in rep.g.events()]
    names = game.names
    pov = seats[0] if len(seats) == 1 else None
    steps = build_steps(events, decisions, names, top=top, pov=pov)
    scores = list(rep.g.scores)
    result = {"scores": scores, "ranks": [r + 1 for r in placements(scores)]}
    meta: dict[str, Any] = {"seats": list(seats), "hands": rep.hands}
    summary: dict[str, Any] = {}
    if heads is not None:
        meta["agreement"] = agreement(decisions)
        summary = summary_table(meta["agreement"], [names[s] for s in seats])
    return Replay(game=GAME, title=title or "mahjong game", players=names, steps=steps, meta=meta,
                  result=result, summary=summary)


def summary_table(stats: dict[str, Any], reviewed: Sequence[str]) -> dict[str, str]:
    """The agreement statistics as the page's summary rows (`agreement`'s numbers stay in ``meta``)."""

    def rate(s: dict[str, Any]) -> str:
        if not s["decisions"]:
            return "no decisions"
        return f"{100 * s['agreement']:.1f}% ({s['agree']} / {s['decisions']})"

    rows = {"reviewed": ", ".join(reviewed), "policy's top choice = played": rate(stats["all"])}
    rows.update({f"  {kind} decisions": rate(stats[kind]) for kind in KINDS})
    mean = stats["all"]["mean_p_played"]
    rows["mean probability of the played action"] = "" if mean is None else f"{mean:.3f}"
    return rows


def games_of(lines: Iterable[str]) -> list[LogGame]:
    """The games of a log's lines; a log without any event is a `ReviewError`."""
    games = [g for g in split_games(lines) if g.events or g.error]
    if not games:
        raise ReviewError("no events (the log is empty)")
    return games


__all__ = ["GAME", "KINDS", "ReviewError", "SeatDecision", "agreement", "build_steps", "decision_kind",
           "event_label", "games_of", "index_label", "review_game", "score", "summary_table"]
