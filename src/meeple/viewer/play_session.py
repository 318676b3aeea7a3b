"""What the play server (``python -m meeple.play``) asks of a game: a :class:`PlaySession`.

A game plugin registers a factory under the entry-point group ``meeple.play`` (name = game):
``factory(checkpoint_path, *, seed, human_seat, **opts) -> PlaySession``. The session owns one
game between a person (``human_seat``) and the checkpoint's policy (and bots, for games of more
than two seats). Its ``state()`` is the JSON the game's viewer renderer draws
(``meeple.viewer.renderers``), so the play page and the replay pages draw boards alike.

:class:`SearchSession` is the session of a two-seat game played by a ``meeple_native`` search
(``meeple.plugins.arena.NativeMCTSPlayer``): the AlphaZero games bind their position's moves.
Torch-free: the plugin builds the player (``meeple.export.policy.search_player``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from importlib.metadata import EntryPoint
from typing import Any, Protocol, runtime_checkable

from meeple.errors import ConfigError, MeepleError, PluginNotFoundError
from meeple.plugins.registry import PLAY_GROUP, installed
from meeple.viewer.replay import Decision, Step
from meeple.viewer.search import search_decision

TOP_CHOICES = 5  # the search's most visited moves shown for an agent's move


class IllegalMove(MeepleError, ValueError):
    """A move the session refuses: names it and what is accepted now."""


@runtime_checkable
class PlaySession(Protocol):
    finished: bool
    players: list[str]  # each seat's name ("you" at the human's)
    human_seat: int

    def state(self) -> dict[str, Any]:
        """The game now, as the renderer's state JSON."""

    def legal(self) -> list[dict[str, str]]:
        """The human's legal moves now as ``{"id", "label"}`` (empty when it is not their turn)."""

    def play(self, action_id: str) -> None:
        """Play the human's move; :class:`IllegalMove` (and nothing changes) when it is not legal."""

    def advance(self) -> list[Step]:
        """The other seats' moves until the human's turn or the end, one Step each."""

    def result(self) -> dict[str, Any]:
        """The outcome once finished (empty before)."""

    def log(self) -> tuple[str, str]:
        """``(filename, text)``: the game in the game's usual notation (moves, PGN, MJAI)."""


def load_play_factory(game: str, available: dict[str, EntryPoint] | None = None) -> Any:
    """The session factory of ``game``; a one-line error names the games that can be played.
    ``available`` replaces the installed entry points (tests read them from the plugins' sources)."""
    eps = installed(PLAY_GROUP) if available is None else available
    if game not in eps:
        choices = ", ".join(sorted(eps)) or "none (pip install -e plugins/<game>)"
        raise PluginNotFoundError(f"game {game!r} cannot be played in the browser; installed: {choices}")
    return eps[game].load()


class SearchSession(ABC):
    """Two seats taking turns on one native position: the human's and a search player's.

    ``player`` is a ``NativeMCTSPlayer`` (its ``last_search`` is shown as the agent's decision);
    ``opening`` moves are played first, by nobody (the game goes on from that position). Actions
    are the engine's integers; their ids on the wire are :meth:`action_id` (``str(int)`` unless the
    game's renderer submits others, e.g. a move's notation). A subclass names the position's rules:
    :meth:`legal_actions`, :meth:`label`, :meth:`apply`, :meth:`over`, and the protocol's
    :meth:`state`, :meth:`result` and :meth:`log`; :meth:`to_play` reads the position's own.
    """

    game: str

    def __init__(self, player: Any, position: Any, *, human_seat: int, opening: Sequence[int] = ()) -> None:
        if human_seat not in (0, 1):
            raise ConfigError(f"--seat {human_seat}: accepted 0 (move first) or 1 (move second)")
        self.player = player
        self.position = position
        self.human_seat = human_seat
        self.players = ["you" if seat == human_seat else "agent" for seat in (0, 1)]
        self.moves: list[int] = []
        for action in opening:  # a position to play from: these moves are nobody's choice
            if self.over() or action not in self.legal_actions():
                raise ConfigError(f"opening move {action} after {self.moves} is not legal")
            self._push(action)

    # -- the position's rules (the subclass) ---------------------------------------------------
    @abstractmethod
    def legal_actions(self) -> list[int]: ...

    @abstractmethod
    def label(self, action: int) -> str:
        """The move as a person writes it, in the position before it is played."""

    def action_id(self, action: int) -> str:
        """The move's id on the wire (what the renderer's ``input`` hook submits)."""
        return str(action)

    @abstractmethod
    def apply(self, action: int) -> None: ...

    def to_play(self) -> int:
        return int(self.position.to_play)

    @abstractmethod
    def over(self) -> bool: ...

    @abstractmethod
    def state(self) -> dict[str, Any]: ...

    @abstractmethod
    def result(self) -> dict[str, Any]: ...

    @abstractmethod
    def log(self) -> tuple[str, str]: ...

    # -- the protocol --------------------------------------------------------------------------
    @property
    def finished(self) -> bool:
        return self.over()

    def legal(self) -> list[dict[str, str]]:
        if self.finished or self.to_play() != self.human_seat:
            return []
        return [{"id": self.action_id(a), "label": self.label(a)} for a in self.legal_actions()]

    def play(self, action_id: str) -> None:
        if self.finished:
            raise IllegalMove(f"move {action_id!r}: the game is over")
        if self.to_play() != self.human_seat:
            raise IllegalMove(f"move {action_id!r}: it is not your turn")
        legal = {self.action_id(a): a for a in self.legal_actions()}
        if action_id not in legal:
            raise IllegalMove(f"move {action_id!r} is not legal here; accepted ids: {', '.join(legal)}")
        self._push(legal[action_id])

    def advance(self) -> list[Step]:
        steps = []
        while not self.finished and self.to_play() != self.human_seat:
            before = self.state()
            seat = self.to_play()
            action, decision = self._search()
            label = self.label(action)
            self._push(action)
            steps.append(Step(state=before, actor=seat, action=label, decision=decision))
        return steps

    def _push(self, action: int) -> None:
        self.apply(action)
        self.moves.append(action)

    def _search(self) -> tuple[int, Decision | None]:
        """The player's move (greedy on the visits) and its search's top moves and value; the
        move played is always listed (a tie in visits may leave it out of the top)."""
        action = int(self.player.move(self.position))
        return action, search_decision(self.player, self.label, TOP_CHOICES, action)
