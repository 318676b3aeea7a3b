"""The league protocol: what an env offers so that a league can seat networks at its tables.

    env.league_seats                 # how many networks seat() names per table
    env.set_league(policies, seat)   # {name: policy fn}; seat(table, game) -> league_seats names
    env.update_policy(name, fn)      # add or replace a network between steps
    env.pop_results()                # games finished since the last call:
                                     # {"players": [name per seat, "learner"], "ranks": [...], ...}

A policy fn is ``fn(obs [N, ...], mask [N, A] bool) -> actions [N]`` (meeple.nets.policy_fn).
A game plugin's env follows it when asked (e.g. ``env.league=true``).
"""

from __future__ import annotations

import re
from typing import Any

LATEST = "latest"  # the learner's frozen copy at a table
ANCHOR = "anchor"  # the policy the stage started from
LEARNER = "learner"  # the learner's seat in results and its rating
SNAPSHOT_NAME = re.compile(r"^v\d{4,}$")  # the pool's promoted snapshots: v0001, v0002, ...
PROTOCOL = ("set_league", "update_policy", "pop_results")


def is_league_env(env: Any) -> bool:
    """Whether ``env`` seats networks by the league protocol."""
    return all(callable(getattr(env, m, None)) for m in PROTOCOL) and hasattr(env, "league_seats")


def seat_self_play(env: Any, fn: Any) -> None:
    """Every other seat of every table played by ``fn`` (e.g. to record a policy's own games)."""
    env.set_league({LATEST: fn}, lambda table, game: [LATEST] * env.league_seats)
