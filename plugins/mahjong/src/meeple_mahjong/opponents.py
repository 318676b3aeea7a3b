"""Networks in the env's opponent seats (``env.opponents`` naming a network, docs/mahjong_env.md).

`NetworkSeats` owns the frozen policies that play some non-learner seats of `MahjongEnv`:
given the simulator's rows and the slots whose decisions are due, it calls each policy once
on all of its due rows (one batched forward per network per simulator step) and counts
decisions and forwards as `PolicyTable` does. A policy is a policy function
(`meeple_mahjong.specs`: ``fn(obs, mask) -> actions``, or an oracle one).

`load_checkpoint_opponents` turns ``env.opponent_checkpoints`` into such policies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from meeple.errors import ConfigError

from .policy import greedy_policy, load_policy_actor, sampled_policy
from .specs import PolicyFn, call_policy, is_oracle

CHECKPOINT_KEYS = ("path", "greedy", "seed", "device")


def network_names(policies: Mapping[str, PolicyFn] | None, checkpoints: Mapping[str, Any] | None,
                  bots: Sequence[str]) -> list[str]:  # fmt: skip
    """The names ``env.opponents`` may use for networks (checked: unique, not a bot's)."""
    policies, checkpoints = policies or {}, checkpoints or {}
    twice = sorted(set(policies) & set(checkpoints))
    if twice:
        raise ConfigError(f"opponent network(s) {twice} given both as policies and as checkpoints")
    bad = sorted(n for n in [*policies, *checkpoints] if n in bots)
    if bad:
        raise ConfigError(
            f"env.opponent_checkpoints: network name(s) {bad} are bot names; accepted: any "
            f"other name (bots: {', '.join(bots)})"
        )
    return [*policies, *checkpoints]


class NetworkSeats:
    """Routes due decisions to their network. ``owner[table, col]`` is the index in ``names``
    of the network playing simulator column ``col`` at ``table`` (-1: a learner column); a
    league rewrites a table's row when the table starts a game (`seat_table`)."""

    @classmethod
    def seat(cls, tables: int, learners: int, players: Mapping[int, str],
             policies: Mapping[str, PolicyFn] | None, checkpoints: Mapping[str, Any] | None) -> NetworkSeats:  # fmt: skip
        """Networks for simulator columns ``learners + i``, the i-th seat of ``players``
        (seat -> name), the same at every table; a name's policy is given or loaded (only
        seated checkpoints load)."""
        names = list(dict.fromkeys(players.values()))
        fns = {n: (policies or {})[n] for n in names if n in (policies or {})}
        fns |= load_checkpoint_opponents({n: checkpoints[n] for n in names if n not in fns})
        row = [-1] * learners + [names.index(n) for n in players.values()]
        return cls({n: fns[n] for n in names}, torch.tensor(row).expand(tables, -1))

    def __init__(self, policies: Mapping[str, PolicyFn], owner: torch.Tensor) -> None:
        self.policies: dict[str, PolicyFn] = {}
        self.names: list[str] = []
        self.decisions: dict[str, int] = {}
        self.forwards: dict[str, int] = {}
        for name, fn in policies.items():
            self.put(name, fn)
        self.owner = owner.to(torch.int64).clone()  # [tables, columns]

    @property
    def oracle(self) -> bool:
        """Whether some network reads the oracle planes (the env then asks the simulator for them)."""
        return any(is_oracle(fn) for fn in self.policies.values())

    def put(self, name: str, fn: PolicyFn) -> None:
        """Adds network ``name`` or replaces its policy; seats it already holds keep it (its
        index in ``names`` stays), so the next decisions there are the new policy's."""
        if not callable(fn):
            raise ValueError(f"network {name!r}: a policy must be callable fn(obs, mask) -> actions, "
                             f"got {type(fn).__name__}")
        if name not in self.policies:
            self.names.append(name)
            self.decisions[name] = self.forwards[name] = 0
        self.policies[name] = fn

    def seat_table(self, table: int, row: Sequence[str | None]) -> None:
        """Seats ``row[col]`` (a network's name, None for a learner column) at ``table``."""
        self.owner[table] = torch.tensor([-1 if n is None else self.names.index(n) for n in row])

    def act(self, due: torch.Tensor, obs: torch.Tensor, mask: torch.Tensor,
            oracle: torch.Tensor | None, actions: torch.Tensor) -> None:  # fmt: skip
        """Writes each network's actions into ``actions[slot]`` for the slots where ``due``
        ([tables, columns] bool); rows are flat slots ``table * columns + col``. One call per
        network with due rows, on all of them."""
        owner = torch.where(due, self.owner, -1)
        for k in owner.unique().tolist():
            if k < 0:
                continue
            rows = (owner == k).reshape(-1).nonzero().squeeze(-1)
            actions[rows] = self._call(self.names[k], rows, obs, mask, oracle)

    def _call(self, name, rows, obs, mask, oracle) -> torch.Tensor:
        actions = call_policy(self.policies[name], obs[rows], mask[rows].view(torch.bool),
                              None if oracle is None else oracle[rows], what=f"opponent network '{name}'")
        self.decisions[name] += len(rows)
        self.forwards[name] += 1
        return actions


def load_checkpoint_opponents(checkpoints: Mapping[str, Any]) -> dict[str, PolicyFn]:
    """``{name: path}`` or ``{name: {path, greedy=True, seed=0, device="cpu"}}`` -> policies.

    ``greedy: false`` samples from the masked softmax with the network's own generator
    seeded by ``seed`` (reproducible, independent of the learner's sampling)."""
    if not checkpoints:
        return {}
    specs = {}
    for name, spec in checkpoints.items():
        spec = {"path": spec} if isinstance(spec, str) else dict(spec)
        unknown = sorted(set(spec) - set(CHECKPOINT_KEYS))
        if unknown or "path" not in spec:
            raise ConfigError(
                f"env.opponent_checkpoints.{name}={spec}: give a path, or a mapping with keys "
                f"{', '.join(CHECKPOINT_KEYS)} (path required)"
            )
        specs[name] = spec
    policies = {}
    for name, spec in specs.items():
        device = str(spec.get("device", "cpu"))
        actor, _ = load_policy_actor(spec["path"], device=device)
        if spec.get("greedy", True):
            policies[name] = greedy_policy(actor, device=device)
        else:
            policies[name] = sampled_policy(actor, seed=int(spec.get("seed", 0)), device=device)
    return policies
