"""``env.league: true``: one learner seat per table against networks a league chooses per game.

`LeagueEnv` is `MahjongEnv` with all four seats driven from Python (the simulator has no
bots) and the seating decided per table per game instead of once:

- the learner's seat at table ``t`` in its game ``k`` (0, 1, ... per table, counted from the
  last ``set_seed``) is ``(t + k) % 4``, so every table visits each seat in turn;
- ``seat(t, k)``, the callback given to `set_league`, names the networks for the other three
  seats (learner's seat + 1, + 2, + 3 mod 4) when the table starts that game;
- the env's batch is one slot per table: the learner's rows only (observation, mask, reward,
  rank, score, and ``seat``, the seat it plays in this game); the networks' decisions are
  made between the learner's, as for network opponents (`MahjongEnv._play_networks`), one
  batched forward per network per simulator step over every table it sits at;
- `pop_results` hands over the finished games (ranks and scores of all four seats) for the
  league's ratings; `update_policy` swaps one network between steps.

The protocol is the one ``meeple.phases.league`` relies on (docs/mahjong_env.md, "League").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from meeple.errors import ConfigError
from meeple.phases.league.protocol import LEARNER  # the learner's entry in a result's "players"

from .batch_env import MahjongEnv, check_options, require_held_steps
from .opponents import NetworkSeats
from .specs import PolicyFn, is_oracle

SeatFn = Callable[[int, int], Sequence[str]]


class LeagueEnv(MahjongEnv):
    """``num_envs`` tables, one learner slot each (see the module doc)."""

    def __init__(
        self,
        num_envs: int,
        *,
        learner_seats: Sequence[int] = (0,),
        rules: Mapping[str, Any] | None = None,
        threads: int = 1,
        score_scale: float = 1e-4,
        rank_reward: Sequence[float] = (0.9, 0.45, 0.0, -1.35),
        oracle: bool = False,
        hand_reward: str | None = None,
        device: str | torch.device = "cpu",
    ) -> None:
        if len(learner_seats) != 1:
            raise ConfigError(
                f"env.learner_seats={list(learner_seats)} with env.league=true; accepted: one seat "
                "(e.g. [0]): a league table has one learner seat, which rotates over the games"
            )
        if num_envs < 1:
            raise ConfigError(f"env.num_envs={num_envs}; accepted: >= 1 (one slot per table)")
        rules = check_options(rules, threads, rank_reward)
        require_held_steps("env.league")
        nets = NetworkSeats({}, torch.full((num_envs, 4), -1))
        self._build([0, 1, 2, 3], torch.zeros(num_envs, 1, dtype=torch.int64), ["random"] * 4, nets,
                    rules=rules, threads=threads, score_scale=score_scale, rank_reward=rank_reward,
                    oracle=oracle, hand_reward=hand_reward, device=device)  # fmt: skip
        self._seat_fn: SeatFn | None = None
        self._games = [0] * num_envs  # games started per table since the last set_seed
        self._players: list[list[str]] = [[LEARNER] * 4 for _ in range(num_envs)]
        self._results: list[dict[str, Any]] = []

    # -- the league protocol --
    league_seats = 3  # the networks seat() names per table (the seats besides the learner's)

    def set_league(self, policies: Mapping[str, PolicyFn], seat: SeatFn) -> None:
        """``policies``: every network that may sit at a table, by name; ``seat(table, game)``
        names the 3 networks of the non-learner seats (in seat order after the learner's) when
        ``table`` starts its game ``game``. Call before the first reset; calling again adds or
        replaces policies (as `update_policy`) and swaps the callback for the next games."""
        if not callable(seat):
            raise ValueError(f"set_league: seat must be callable seat(table, game) -> 3 names, got {seat!r}")
        if not policies:
            raise ValueError("set_league: policies is empty; give every network that may sit at a table, by name")
        for name, fn in policies.items():
            self.update_policy(name, fn)
        self._seat_fn = seat

    def update_policy(self, name: str, fn: PolicyFn) -> None:
        """Adds network ``name`` or replaces its policy; tables it sits at play the new one from
        their next decision on (games in progress keep their seating)."""
        if not isinstance(name, str) or not name or name == LEARNER:
            raise ValueError(
                f"league network name {name!r}; accepted: a non-empty string other than {LEARNER!r} "
                "(results name the learner's seat so)"
            )
        if is_oracle(fn) and not (self.oracle or self.nets.oracle) and self._last is not None:
            # The rows of the step under way were encoded without the oracle planes it reads.
            raise ValueError(
                f"league network {name!r} is an oracle policy (fn.oracle): it can join only through "
                "set_league before the first reset, or in an env with env.oracle=true"
            )
        self.nets.put(name, fn)

    def pop_results(self) -> list[dict[str, Any]]:
        """The games finished since the last call, in finishing order: ``{"table", "game",
        "learner_seat", "players" (per seat, the learner's "learner"), "ranks" (0 = first, per
        seat), "scores" (final points per seat)}``. Games cut short by a reset are not included."""
        results, self._results = self._results, []
        return results

    # -- MahjongEnv hooks --
    def _set_seed(self, seed: int | None) -> None:
        super()._set_seed(seed)
        self._games = [0] * self.num_tables  # a new simulator: its tables start at game 0

    def _start_games(self, tables: Any) -> None:
        if self._seat_fn is None:
            raise ValueError("league env: call env.set_league(policies, seat) before the first reset")
        starting = range(self.num_tables) if tables is None else np.flatnonzero(tables).tolist()
        # Ask for every table first, so a bad answer leaves every table as it was.
        seating = {t: self._seating(t, self._games[t]) for t in starting}
        for t, (learner, players) in seating.items():
            self._learner_cols[t, 0] = learner
            self.nets.seat_table(t, [None if p == LEARNER else p for p in players])
            self._players[t] = players
            self._games[t] += 1

    def _seating(self, table: int, game: int) -> tuple[int, list[str]]:
        """The learner's seat and the players per seat of ``table``'s game ``game``."""
        learner = (table + game) % 4
        names = self._seat_fn(table, game)
        after = [(learner + i) % 4 for i in range(1, self.league_seats + 1)]
        known = self.nets.names
        if isinstance(names, str) or not isinstance(names, Sequence) or len(names) != self.league_seats or any(
            n not in known for n in names
        ):
            raise ValueError(
                f"seat({table}, {game}) returned {names!r}; accepted: {self.league_seats} network names for seats "
                f"{after} (the learner sits in seat {learner}), each one of set_league's or "
                f"update_policy's: {', '.join(known)}"
            )
        players = [LEARNER] * 4
        for s, name in zip(after, names, strict=True):
            players[s] = str(name)
        return learner, players

    def _stepped(self, buf: dict[str, torch.Tensor]) -> None:
        # A game ends in exactly one simulator step (held tables report done 0), whose rows
        # hold every seat's final rank and score (columns are seats here).
        T = self.num_tables
        done = buf["done"].view(torch.bool).view(T, 4).any(1)
        for t in done.nonzero().flatten().tolist():
            learner = int(self._learner_cols[t, 0])
            self._results.append({
                "table": t,
                "game": self._games[t] - 1,
                "learner_seat": learner,
                "players": list(self._players[t]),
                "ranks": buf["rank"].view(T, 4)[t].tolist(),
                "scores": buf["score"].view(T, 4)[t].tolist(),
            })  # fmt: skip
