"""What a replay page shows, as plain data: a game's steps, each with the state its renderer draws,
the move that leads on, and the agent's decision there (top actions, probabilities, search visits,
value). Torch-free, so a review tool or a play server builds one without a network loaded.

``to_json`` / ``from_json`` are the page's JSON (the ``#replay`` script element of the page).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from meeple.errors import MeepleError


@dataclass
class Choice:
    """One candidate action: its label (as the game writes moves), probability and search visits."""

    action: str
    p: float
    visits: int | None = None


@dataclass
class Decision:
    """The agent's view of one step: its top candidates (best first) and its value estimate."""

    top: list[Choice]
    value: float | None = None


@dataclass
class Step:
    """One position: ``state`` is the game's own plain JSON (what its renderer draws); ``action``
    leads from this step to the next (None on the last); ``marks`` flag it ("win", "deal-in",
    "disagree", "blunder")."""

    state: dict
    actor: int | None = None
    action: str | None = None
    decision: Decision | None = None
    marks: list[str] = field(default_factory=list)
    note: str = ""


@dataclass
class Replay:
    """A game as the viewer shows it. ``result`` (e.g. winner, score) heads the page;
    ``summary`` (e.g. a review's agreement statistics) is its table."""

    game: str
    title: str
    players: list[str]
    steps: list[Step]
    meta: dict = field(default_factory=dict)
    result: dict = field(default_factory=dict)
    summary: dict = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Replay:
        """The replay of a ``to_json`` dict; a missing or mistyped field is one line naming it."""
        try:
            steps = [_step(s) for s in data["steps"]]
            fields = {k: data[k] for k in ("game", "title", "players")}
        except (KeyError, TypeError) as err:
            raise MeepleError(f"not a replay: missing or mistyped {err}; accepted: a dict from Replay.to_json() "
                              "(game, title, players, steps[, meta, result, summary])") from None
        return cls(**fields, steps=steps, **{k: dict(data.get(k) or {}) for k in ("meta", "result", "summary")})


def _step(data: dict[str, Any]) -> Step:
    decision = data.get("decision")
    if decision is not None:
        decision = Decision([Choice(**c) for c in decision["top"]], decision.get("value"))
    return Step(state=data["state"], actor=data.get("actor"), action=data.get("action"), decision=decision,
                marks=list(data.get("marks") or []), note=data.get("note") or "")
