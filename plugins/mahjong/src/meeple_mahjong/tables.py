"""What plays mahjong games for an evaluation: a `Table` plays a batch of `GameJob`s and returns
per-seat `SeatResult`s. `BotTable` plays the built-in bots natively; a learned policy plugs in as
another `Table` (`meeple_mahjong.policy.PolicyTable`). The duplicate protocol
(`meeple_mahjong.duplicate`) is written against `Table` alone.

Torch-free (a bots-only duplicate never imports it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from meeple_native import mahjong as _mj

BOTS: tuple[str, ...] = tuple(_mj.bot_names())  # random, rule, rule-nofold (docs/mahjong_bots.md)


@dataclass(frozen=True)
class GameJob:
    """One game to play: walls from (session_seed, game_index), players[s] in seat s."""

    session_seed: int
    game_index: int
    players: tuple[str, str, str, str]
    policy_seed: int


@dataclass(frozen=True)
class SeatResult:
    """What one seat did over one whole game."""

    score: int
    rank: int  # 1..4, ties to the lower seat (the engine's seat order)
    hands: int  # hands played in the game (the same for every seat)
    wins: int
    tsumo: int
    deal_ins: int  # rons this seat paid
    riichi: int
    calls: int  # open melds (chi, pon, open kan)


class Table(Protocol):
    """Plays games; a learned policy implements this to reuse the duplicate bookkeeping."""

    def play(self, jobs: Sequence[GameJob]) -> list[list[SeatResult]]: ...


def check_bot(name: str, what: str = "bot") -> str:
    if name not in BOTS:
        raise ValueError(f"unknown {what} '{name}'; accepted: {', '.join(BOTS)}")
    return name


class BotTable:
    """Built-in bots (random, rule, rule-nofold) played natively, one game per call."""

    def __init__(self, **rules: Any) -> None:
        self._game = _mj.Game(**rules)
        self._game.set_record_events(False)

    def play(self, jobs: Sequence[GameJob]) -> list[list[SeatResult]]:
        out = []
        for job in jobs:
            for p in job.players:
                check_bot(p, "player")
            self._game.reset(job.session_seed, job.game_index)
            out.append(seat_results(_mj.play_bots(self._game, list(job.players), job.policy_seed)))
        return out


def seat_results(d: dict[str, Any]) -> list[SeatResult]:
    """`play_bots`' per-seat lists as four SeatResults."""
    keys = ("scores", "ranks", "wins", "tsumo", "deal_ins", "riichi", "calls")
    return [
        SeatResult(
            score=d["scores"][s],
            rank=d["ranks"][s],
            hands=d["hands"],
            **{k: d[k][s] for k in keys[2:]},
        )
        for s in range(4)
    ]
