"""League tables in Ray actors (``phase=league collector=ray``, docs/league.md).

In one process the env calls the module's ``seat(table, game)`` whenever a table starts a game.
An actor cannot call back into the learner per game, so the seating travels the other way, once
per rollout, with the weights the actor acts with (:class:`meeple.data.ray_actors.RayActorsCollector`):

* the learner side (:class:`RaySeating`, given to the collector as its ``env_hook``) sends every
  actor the pool's :class:`~meeple.phases.league.pool.SeatMix` (the membership and mix now), a
  seed drawn from the module's seating generator (saved in checkpoints), and an object-store
  reference per member's weights (each put once, when it joins);
* the actor side (:class:`ActorSeats`, one per actor) seats the tables of its own league env
  from that mix with that seed, builds the drawn networks itself (the ``device_slots`` most
  recently used kept, as the learner's pool does), and plays the ``latest`` seats with the
  weights it acts with, which are the learner's at the rollout boundary;
* after the rollout the actor reports its finished games (tables numbered across actors:
  actor ``i``'s table ``t`` is ``i * tables + t``), its seat counts and network builds, and the
  learner rates the games and promotes as in one process.

Games in progress when the membership changes keep their seating (the env holds their
networks), as in one process.
"""

from __future__ import annotations

import copy
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import torch

from meeple.errors import ConfigError
from meeple.phases.league.pool import OpponentPolicies
from meeple.phases.league.protocol import LATEST, is_league_env

_SEED_STREAMS = 1_000_003  # apart: the opponent-sampling seeds of different actors


class ActorSeats:
    """Runs in a Ray actor beside its env: seats the env's tables from the learner's last plan."""

    def __init__(self, network: torch.nn.Module, *, index: int, greedy: bool, seed: int, device_slots: int) -> None:
        self.network, self.index = network.requires_grad_(False), index
        self.opponent_fns = OpponentPolicies(greedy, seed + _SEED_STREAMS * (index + 1))
        self.device_slots = device_slots
        self.env: Any = None
        self.latest = copy.deepcopy(self.network)
        self._built: OrderedDict[str, Callable] = OrderedDict()  # LRU, most recent last
        self._plan: dict[str, Any] | None = None
        self._rng = torch.Generator()
        self._seats: Counter[str] = Counter()
        self._builds = 0

    def attach(self, env: Any) -> None:
        """The actor's env, before its first reset."""
        if not is_league_env(env):
            raise ConfigError(f"phase=league collector=ray: the actor's env {type(env).__name__} does not seat "
                              "networks (an env option turns it on, e.g. env.league=true)")
        self.env = env

    def begin(self, plan: dict[str, Any], weights: dict[str, torch.Tensor]) -> None:
        """A rollout starts: the learner's ``plan`` (mix, seed, member weights) and current weights."""
        self.latest.load_state_dict(weights)
        first = self._plan is None
        self._plan = plan
        self._rng.manual_seed(int(plan["seed"]))
        for name in [n for n in self._built if n not in plan["weights"]]:
            del self._built[name]  # left the pool (games seated with it keep their network)
        if first:
            self.env.set_league({LATEST: self.opponent_fns(self.latest)}, self.seat)

    def seat(self, table: int, game: int) -> list[str]:
        return self._plan["mix"].seat(self._rng, self.env, self._policy, self._seats)

    def end(self) -> dict[str, Any]:
        """The rollout's report: finished games, seats drawn and networks built since the last one."""
        tables = int(self.env.batch_size[0])
        results = []
        for result in self.env.pop_results():
            results.append({**result, "table": self.index * tables + result["table"], "actor": self.index})
        report = {"results": results, "seats": dict(self._seats), "builds": self._builds}
        self._seats, self._builds = Counter(), 0
        return report

    def _policy(self, name: str) -> Callable:
        if name in self._built:
            self._built.move_to_end(name)
            return self._built[name]
        weights = self._plan["weights"][name]
        if not isinstance(weights, Mapping):  # an object-store reference (plain weights: no Ray needed)
            import ray

            weights = ray.get(weights)
        network = copy.deepcopy(self.network)
        network.load_state_dict(weights)
        self._built[name] = self.opponent_fns(network)
        self._builds += 1
        while len(self._built) > self.device_slots:
            self._built.popitem(last=False)
        return self._built[name]


class RaySeating:
    """The learner's side: one :class:`ActorSeats` per actor, a plan per rollout, the reports back
    to the module (``module.take_report``)."""

    def __init__(self, module: Any) -> None:
        self.module = module
        self._refs: dict[str, Any] = {}  # member name -> its weights in Ray's object store

    def actor_part(self, index: int) -> ActorSeats:
        m = self.module
        return ActorSeats(copy.deepcopy(m.actor).cpu(), index=index, greedy=m.opponent_fns.greedy,
                          seed=m.opponent_fns.seed, device_slots=m.league.device_slots)

    def plans(self, put: Callable[[Any], Any], actors: int) -> list[dict[str, Any]]:
        pool = self.module.pool
        self._refs = {name: self._refs[name] if name in self._refs else put(pool.weights(name))
                      for name in pool.names()}
        mix = pool.seat_mix()
        seeds = torch.randint(2**62, (actors,), generator=self.module.seating).tolist()
        return [{"mix": mix, "seed": seed, "weights": dict(self._refs)} for seed in seeds]

    def receive(self, reports: list[dict[str, Any]]) -> None:
        for report in reports:
            self.module.take_report(report)
