"""Auto-battler games as replays for the viewer (:mod:`meeple.viewer`, docs/viewer.md), read
from the policy seat's own observations (docs/autobattler.md, "Observation"): per decision its
health, gold, level, board, bench, shop, the last fight's outcome and the other players'
health, the action taken and, when the policy's probabilities are given, its top actions.

``renderer`` is this plugin's ``meeple.viewers`` entry point (``viewer/renderer.js``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from meeple.viewer.renderers import Renderer
from meeple.viewer.replay import Choice, Decision, Replay, Step
from meeple_autobattler import layout as L

GAME = "autobattler"
# docs/autobattler.md, "Units" (kind -> name); the game's own table is in TypeScript
UNIT_NAMES = ("ember scout", "tide archer", "stone guard", "gale runner", "ember mage", "tide knight",
              "stone golem", "gale lancer", "ember dragon", "tide oracle", "stone titan", "gale phoenix")
Probs = Callable[[np.ndarray, np.ndarray], np.ndarray]  # (obs [1, 612], mask [1, 92]) -> [1, 92]


def renderer() -> Renderer:
    return Renderer.from_package(GAME, __package__)


def _unit(obs: np.ndarray, slot: int) -> dict | None:
    at = L.unit_slot(slot)
    if obs[at] <= 0:
        return None
    kind = int(obs[at + 1 : at + 1 + L.NUM_KINDS].argmax())
    star = int(obs[at + 1 + L.NUM_KINDS : at + L.UNIT_FEATURES].argmax()) + 1
    return {"kind": kind, "name": UNIT_NAMES[kind], "tier": L.tier_of_kind(kind), "star": star}


def seat_state(obs: np.ndarray) -> dict:
    """The plain-JSON state the renderer draws, decoded from one seat's observation."""
    me = obs[L.O_SELF : L.O_SELF + 16]
    fight = obs[L.O_FIGHT : L.O_FIGHT + 5 + L.PLAYERS - 1]
    opponents = obs[L.O_OPPONENTS : L.O_FIGHT].reshape(L.PLAYERS - 1, L.OPPONENT_FEATURES)
    seat = fight[5:]
    return {
        "round": round(float(me[4]) * 30), "hp": round(float(me[L.SELF_HP]) * L.START_HP),
        "gold": round(float(me[L.SELF_GOLD]) * 50), "level": round(float(me[L.SELF_LEVEL]) * L.MAX_LEVEL),
        "board": [_unit(obs, c) for c in range(L.BOARD)],
        "bench": [_unit(obs, L.BOARD + b) for b in range(L.BENCH)],
        "shop": [_unit(obs, L.BOARD + L.BENCH + s) for s in range(L.SHOP)],
        "fight": {"won": bool(me[14] > 0), "lost": bool(me[15] > 0), "draw": bool(fight[0] > 0),
                  "hp_lost": round(float(fight[1]) * 20), "hp_dealt": round(float(fight[2]) * 20),
                  "ghost": bool(fight[3] > 0), "survivors": round(float(fight[4]) * 16),
                  "opponent": int(seat.argmax()) + 1 if seat.any() else None},  # seats after this one
        "others": [{"alive": bool(o[0] > 0), "hp": round(float(o[1]) * L.START_HP),
                    "level": round(float(o[2]) * L.MAX_LEVEL), "place": round(float(o[7]) * L.PLAYERS)}
                   for o in opponents],
    }


def action_label(action: int, state: dict) -> str:
    """The action in words (docs/autobattler.md, "Actions"), naming the unit it moves."""
    def name(unit: dict | None) -> str:
        return f" ({unit['name']} {'*' * unit['star']})" if unit else ""

    if action == L.A_END:
        return "end turn"
    if action == L.A_REROLL:
        return "reroll"
    if action == L.A_XP:
        return "buy XP"
    if action < L.A_SELL_BENCH:
        return f"buy shop {action - L.A_BUY + 1}{name(state['shop'][action - L.A_BUY])}"
    if action < L.A_SELL_BOARD:
        return f"sell bench {action - L.A_SELL_BENCH + 1}{name(state['bench'][action - L.A_SELL_BENCH])}"
    if action < L.A_SWAP:
        return f"sell board {action - L.A_SELL_BOARD + 1}{name(state['board'][action - L.A_SELL_BOARD])}"
    bench, cell = divmod(action - L.A_SWAP, L.BOARD)
    return f"bench {bench + 1} <-> board {cell + 1}{name(state['bench'][bench] or state['board'][cell])}"


class GameRecorder:
    """Collects one seat's decisions (``record``, once per decision it makes) and makes the replay.
    ``probs`` (the policy's action probabilities) fills each step's decision with the ``top``
    actions; without it steps carry the action only."""

    def __init__(self, probs: Probs | None = None, top: int = 3) -> None:
        self.probs, self.top = probs, top
        self.steps: list[Step] = []
        self._round = 0

    def record(self, obs: np.ndarray, legal: np.ndarray, action: int) -> None:
        state = seat_state(obs)
        decision = None
        if self.probs is not None:
            p = self.probs(obs[None], legal[None])[0]
            best = [int(a) for a in np.argsort(-p, kind="stable")[: self.top] if legal[a]]
            decision = Decision([Choice(action_label(a, state), float(p[a])) for a in best])
        marks, note = [], ""
        if state["round"] != self._round:  # the first decision of a round shows the last fight
            self._round = state["round"]
            fight = state["fight"]
            outcome = "won" if fight["won"] else "lost" if fight["lost"] else "draw" if fight["draw"] else ""
            if outcome:
                marks = [f"fight-{outcome}"]
                note = (f"round {self._round}: last fight {outcome}, -{fight['hp_lost']} hp taken, "
                        f"-{fight['hp_dealt']} hp dealt" + (" (against a ghost)" if fight["ghost"] else ""))
        self.steps.append(Step(state, actor=0, action=action_label(action, state), decision=decision,
                               marks=marks, note=note))

    def replay(self, title: str, place: int, players: list[str]) -> Replay:
        """The replay of the recorded decisions; ``place`` is the seat's final place (1..8)."""
        steps = list(self.steps)
        if steps:  # the end: the last state seen, the place as its mark
            steps.append(Step(steps[-1].state, marks=["win" if place == 1 else f"place-{place}"],
                              note=f"finished in place {place} of {L.PLAYERS}"))
        return Replay(GAME, title, players, steps, result={"place": place, "decisions": len(self.steps)})
