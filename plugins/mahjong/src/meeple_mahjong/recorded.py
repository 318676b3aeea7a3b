"""Evaluation games kept as replays: one game on the engine with its MJAI event stream, a network
at one seat and bots (or another network) at the others, then reviewed like any log
(`meeple_mahjong.replay.review_game`) so the page shows the network's probabilities and value at
each of its decisions.

The duplicate evaluation plays on the batched simulator, which keeps no event stream; these
games are played again here, one decision at a time on `Game`, with the same walls
(``Game.reset(seed, game_index)``) and bot streams (``seat_stream_seed(policy_seed, seat)``)
as the duplicate's game of that index (meeple_mahjong.duplicate.policy_seed).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import torch

from meeple.viewer.replay import Replay
from meeple_native import mahjong as _mj

from .duplicate import policy_seed
from .mjai import split_games
from .replay import Scorer, review_game
from .specs import PolicyFn, call_policy, is_oracle


def play_recorded(policies: Mapping[int, PolicyFn], bot: str, *, seed: int, game_index: int,
                  names: list[str], rules: Mapping[str, Any] | None = None) -> list[str]:  # fmt: skip
    """The MJAI events of one game: seat s in ``policies`` plays that policy fn, the other seats
    the built-in ``bot``; ``names`` go into start_game."""
    g = _mj.Game(**dict(rules or {}))
    g.reset(seed, game_index)
    streams = {s: _mj.BotStream(_mj.seat_stream_seed(policy_seed(seed, game_index), s))
               for s in range(4) if s not in policies}  # fmt: skip
    while not g.is_done():
        chosen = {}
        for s in g.pending():  # every answer of a claims window is chosen before any is applied
            fn = policies.get(s)
            if fn is None:
                chosen[s] = streams[s].act(g, s, bot)
                continue
            obs = torch.from_numpy(_mj.encode_public(g, s))[None]
            mask = torch.from_numpy(_mj.legal_mask(g, s).astype(bool))[None]
            oracle = torch.from_numpy(_mj.encode_oracle(g, s))[None] if is_oracle(fn) else None
            index = int(call_policy(fn, obs, mask, oracle, what=f"the policy at seat {s}")[0])
            chosen[s] = _mj.action_from_index(g, s, index)
        for s, action in chosen.items():
            g.step(s, action)
    events = g.events()
    start = json.loads(events[0])
    start["names"] = list(names)
    return [json.dumps(start, separators=(",", ":")), *events[1:]]


def evaluation_replays(heads: Scorer, fn: PolicyFn, opponent: str, opponent_fn: PolicyFn | None, *,
                       games: int, seed: int, first_game: int = 0, rules: Mapping[str, Any] | None = None,
                       title: str = "") -> list[Replay]:  # fmt: skip
    """``games`` evaluation games of policy ``fn`` (reviewed with ``heads``, the same network)
    against three copies of ``opponent``: a bot name, or a network ``opponent_fn`` when given.
    Game k is the duplicate's game index ``first_game + k`` with the policy at seat k % 4."""
    out = []
    for k in range(games):
        seat, index = k % 4, first_game + k
        policies = {s: (fn if s == seat else opponent_fn) for s in range(4)} if opponent_fn else {seat: fn}
        names = ["policy" if s == seat else f"{opponent} {s}" for s in range(4)]
        events = play_recorded(policies, opponent if opponent_fn is None else "rule", seed=seed,
                               game_index=index, names=names, rules=rules)  # fmt: skip
        (game,) = split_games(events)
        name = f"{title}game {index}, policy at seat {seat} vs 3x {opponent}"
        out.append(review_game(game, heads, [seat], rules=dict(rules or {}), title=name))
    return out
