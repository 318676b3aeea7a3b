"""Mahjong in the browser (entry point ``meeple.play: mahjong``, ``python -m meeple.play``): one
person, the checkpoint's policy across the table and rule bots in the other two seats.

The game is the engine's (``meeple_native.mahjong.Game``, east-only by default: a full
east-south game is an hour of clicking); every seat that must act is stepped in the engine's
order (``pending()``), so a claim the person may make waits for them. Their legal moves are the
engine's mask over the 155 action indices (docs/mahjong_encoding.md): a move's id is its index.
The policy decides on the public observation (``encode_public``) as in the duplicate
evaluation; bots draw from their seat's stream as in ``play_bots``. The page draws the table the
replay viewer draws (:class:`meeple_mahjong.viewer.table.Table` over the engine's MJAI events),
with the other seats' concealed tiles hidden until the game ends; the log is the MJAI events.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

import numpy as np

from meeple.errors import ConfigError
from meeple.viewer.play_session import IllegalMove
from meeple.viewer.replay import Choice, Decision, Step
from meeple_native import mahjong as _mj

from .mjai import CHI, DAIMINKAN, placements
from .replay import index_label
from .tables import check_bot
from .viewer.table import Table

HIDDEN = "?"
TOP = 5  # the policy's most likely actions shown for each of its moves
# (obs [84, 34] float32, mask [155] bool) -> (action index, probabilities [155] or None, value or None)
Decide = Callable[[np.ndarray, np.ndarray], tuple[int, np.ndarray | None, float | None]]


def labels(engine: Any, seat: int, indices: Sequence[int]) -> dict[int, str]:
    """The review page's names of ``seat``'s legal action indices (a call names its tiles)."""
    return {i: index_label(i, _mj.action_from_index(engine, seat, i) if CHI <= i <= DAIMINKAN else None)
            for i in indices}


class MahjongSession:
    game = "mahjong"

    def __init__(self, decide: Decide, *, seed: int, human_seat: int = 0, agent_seat: int | None = None,
                 bot: str = "rule", east_only: bool = True, **rules: Any) -> None:
        if human_seat not in range(4):
            raise ConfigError(f"--seat {human_seat}: accepted 0-3 (0 is the first dealer)")
        agent_seat = (human_seat + 2) % 4 if agent_seat is None else agent_seat
        if agent_seat not in range(4) or agent_seat == human_seat:
            raise ConfigError(f"agent seat {agent_seat}: accepted 0-3 other than your seat {human_seat}")
        self.decide = decide
        self.human_seat, self.agent_seat = human_seat, agent_seat
        self.players = [check_bot(bot)] * 4
        self.players[human_seat], self.players[agent_seat] = "you", "agent"
        self.engine = _mj.Game(east_only=east_only, **rules)
        self.engine.reset(seed, 0)
        self.streams = [_mj.BotStream(_mj.seat_stream_seed(seed, s)) for s in range(4)]
        self.table = Table(self.players)
        self._seen = 0
        self._sync()

    def _sync(self) -> None:
        """The table follows the engine's MJAI events (its own names for the seats kept)."""
        for line in self.engine.events(self._seen):
            event = json.loads(line)
            if event.get("type") != "start_game":
                self.table.apply(event)
        self._seen = self.engine.event_count

    @property
    def finished(self) -> bool:
        return bool(self.engine.is_done())

    def state(self) -> dict[str, Any]:
        state = self.table.state()
        if not self.finished:  # what the person cannot see stays hidden: a count draws backs
            for seat in range(4):
                if seat != self.human_seat:
                    state["hands"][seat] = len(state["hands"][seat])
                    state["drawn"][seat] = HIDDEN if state["drawn"][seat] is not None else None
        state["pov"] = self.human_seat  # the renderer's input hook: whose hand is clickable
        return state

    def _your_turn(self) -> bool:
        pending = self.engine.pending()
        return not self.finished and bool(pending) and pending[0] == self.human_seat

    def _legal_indices(self) -> list[int]:
        return [int(i) for i in np.flatnonzero(_mj.legal_mask(self.engine, self.human_seat))]

    def legal(self) -> list[dict[str, str]]:
        if not self._your_turn():
            return []
        named = labels(self.engine, self.human_seat, self._legal_indices())
        return [{"id": str(i), "label": label} for i, label in named.items()]

    def play(self, action_id: str) -> None:
        if not self._your_turn():
            raise IllegalMove(f"move {action_id!r}: " + ("the game is over" if self.finished else "it is not your turn"))
        legal = self._legal_indices()
        index = int(action_id) if action_id.isdigit() else None
        if index not in legal:
            raise IllegalMove(f"move {action_id!r} is not legal here; accepted ids: {', '.join(map(str, legal))}")
        self.engine.step(self.human_seat, _mj.action_from_index(self.engine, self.human_seat, index))
        self._sync()

    def advance(self) -> list[Step]:
        steps = []
        while not self.finished and not self._your_turn():
            seat = self.engine.pending()[0]
            before = self.state()
            decision = None
            if seat == self.agent_seat:
                index, decision = self._agent(seat)
            else:
                action = self.streams[seat].act(self.engine, seat, self.players[seat])
                index = _mj.action_index(action)
            label = labels(self.engine, seat, [index])[index]
            self.engine.step(seat, _mj.action_from_index(self.engine, seat, index))
            self._sync()
            steps.append(Step(state=before, actor=seat, action=label, decision=decision))
        return steps

    def _agent(self, seat: int) -> tuple[int, Decision | None]:
        """The policy's action and, when it gives probabilities, its top actions and value."""
        mask = _mj.legal_mask(self.engine, seat).astype(bool)
        index, probs, value = self.decide(_mj.encode_public(self.engine, seat), mask)
        if probs is None:
            return index, None
        named = labels(self.engine, seat, np.flatnonzero(mask).tolist())
        top = sorted(named, key=lambda i: -probs[i])[:TOP]
        return index, Decision([Choice(named[i], float(probs[i])) for i in top], value)

    def result(self) -> dict[str, Any]:
        if not self.finished:
            return {}
        scores = [int(x) for x in self.engine.scores]
        ranks = [r + 1 for r in placements(scores)]
        you = self.human_seat
        return {"scores": scores, "ranks": ranks, "hands": int(self.engine.hands_played),
                "text": f"you placed {ranks[you]} of 4 with {scores[you]} points"}

    def log(self) -> tuple[str, str]:
        lines = self.engine.events(0)
        start = json.loads(lines[0])  # the engine names the seats p0..p3; the log names the players
        lines[0] = json.dumps({**start, "names": self.players}, separators=(",", ":"))
        return "mahjong.mjson", "".join(line + "\n" for line in lines)


def first_legal(obs: np.ndarray, mask: np.ndarray) -> tuple[int, None, None]:
    """A stand-in policy (tests, a quick look at the page): the lowest legal action index."""
    return int(np.flatnonzero(mask)[0]), None, None


def heads_decide(heads: Callable) -> Decide:
    """The greedy action of `PolicyHeads` (``(obs, mask) -> (probs, values)``), with its
    probabilities and value for the page."""
    import torch

    def decide(obs: np.ndarray, mask: np.ndarray) -> tuple[int, np.ndarray, float | None]:
        probs, values = heads(torch.from_numpy(obs)[None], torch.from_numpy(mask)[None])
        p = probs[0].numpy()
        return int(p.argmax()), p, None if values is None else float(values[0])

    return decide


@cache
def _heads(checkpoint: str) -> Callable:
    from .policy import load_policy_heads

    heads, _ = load_policy_heads(checkpoint)
    if heads.oracle:
        raise ConfigError(f"{checkpoint}: an oracle policy (it reads the hidden tiles); accepted: a policy of "
                          "the public observation (env.oracle=false)")
    return heads


def session(checkpoint: str, *, seed: int, human_seat: int = 0, simulations: int | None = None,
            **opts: Any) -> MahjongSession:
    """A game against ``checkpoint``'s policy (an ``env=mahjong`` PPO checkpoint or run);
    ``opts`` are :class:`MahjongSession`'s (``bot``, ``agent_seat``, ``east_only``, rules)."""
    if simulations is not None:
        raise ConfigError(f"--simulations {simulations}: the mahjong policy plays without search; leave it out")
    return MahjongSession(heads_decide(_heads(str(checkpoint))), seed=seed, human_seat=human_seat, **opts)
