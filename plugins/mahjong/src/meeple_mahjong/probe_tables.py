"""The tables a probe plays on: the learner in seat 0 against three rule bots, without an env.

The change probe and the policy-drift reader drive a `BatchSim` directly (greedy, no rollout
keys); this holds the simulator, the buffers its reset and step fill, as tensors, and the
arguments a branch simulator copying its tables needs.
"""

from __future__ import annotations

import torch

from meeple_native import mahjong as _mj

from .specs import ACTION_KINDS, NUM_ACTIONS, PLANES, WIDTH

_PASS = ACTION_KINDS["pass"].start

# seat 0 learns, every other seat is a rule bot; rewards in units of 10,000 points, no rank term
VS_RULE_BOTS = {"learner_seats": [0], "bots": ["rule"] * 4, "score_scale": 1e-4, "rank_reward": [0.0] * 4}


class ProbeTables:
    """``tables`` tables on the walls of session ``seed``, reset; ``obs``, ``mask``, ``active`` and
    ``done`` hold what the last reset or step wrote."""

    def __init__(self, tables: int, seed: int, *, threads: int = 1) -> None:
        self.rules = _mj.Game()
        self.sim_args = {**VS_RULE_BOTS, "threads": threads}
        self.sim = _mj.BatchSim(tables, self.rules, session_seed=seed, **self.sim_args)
        self.obs = torch.empty(tables, PLANES, WIDTH)
        self.mask = torch.empty(tables, NUM_ACTIONS, dtype=torch.uint8)
        self.active = torch.empty(tables, dtype=torch.uint8)
        self.done = torch.empty(tables, dtype=torch.uint8)
        self._out = {k: getattr(self, k).numpy() for k in ("obs", "mask", "active", "done")}
        self.sim.reset(None, **self._out)
        self._hands_before = 0

    def deciding(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(rows, mask, actions)``: the tables with a decision now, their legal actions (bool),
        and an action per table to fill at those rows before `step` (pass everywhere)."""
        rows = torch.nonzero(self.active.bool()).squeeze(-1)
        return rows, self.mask[rows].bool(), torch.full((len(self.active),), _PASS, dtype=torch.int64)

    def step(self, actions: torch.Tensor) -> None:
        """Plays ``actions`` [tables] (read at the active tables) and starts a new game at every
        table whose game ended."""
        self.sim.step(actions.numpy(), **self._out)
        over = self.done.bool()
        if over.any():
            played = self.sim.hands_played()
            self._hands_before += sum(played[t] for t in torch.nonzero(over).squeeze(-1).tolist())
            self.sim.reset(over.to(torch.uint8).numpy(), **self._out)

    def hands(self) -> int:
        """Hands played so far on these tables, in finished games and in the current ones."""
        return self._hands_before + sum(self.sim.hands_played())
