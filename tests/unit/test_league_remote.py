"""League tables in Ray actors, the actor's side (meeple.phases.league.remote.ActorSeats) without
Ray: plans carry plain weights here. The seating follows the learner's plan exactly, the drawn
networks are the plan's weights, and the reports number tables across actors."""

from __future__ import annotations

import pytest
import torch
from torchrl.data import Bounded, Categorical, Composite

from meeple.errors import ConfigError
from meeple.nets.actor_critic import build_actor_critic
from meeple.phases.league.pool import SeatMix
from meeple.phases.league.protocol import LATEST, LEARNER
from meeple.phases.league.remote import ActorSeats

ACTIONS = 5
MIX = {"self": 0.4, "pool": 0.3, "anchor": 0.3}


class FakeLeagueEnv:
    """The league protocol over ``tables`` tables, without a game: tests start games by hand."""

    league_seats = 3

    def __init__(self, tables: int) -> None:
        self.batch_size = torch.Size([tables])
        self.policies: dict = {}
        self.seat_fn = None
        self.finished: list[dict] = []

    def set_league(self, policies, seat) -> None:
        self.policies.update(policies)
        self.seat_fn = seat

    def update_policy(self, name, fn) -> None:
        self.policies[name] = fn

    def pop_results(self) -> list[dict]:
        done, self.finished = self.finished, []
        return done

    def start(self, table: int, game: int) -> list[str]:
        names = self.seat_fn(table, game)
        self.finished.append({"table": table, "game": game, "players": [LEARNER, *names], "ranks": [0, 1, 2, 3]})
        return names


def _actor():
    spec = Composite(observation=Bounded(-1.0, 1.0, shape=(4,)), action_mask=Categorical(2, shape=(ACTIONS,),
                     dtype=torch.bool))
    actor, _ = build_actor_critic(spec, Categorical(ACTIONS), shared=False, hidden=[8], activation="tanh")
    return actor


def _biased(actor, action: int) -> dict[str, torch.Tensor]:
    """Weights under which the greedy policy always picks ``action``."""
    state = {k: torch.zeros_like(v) for k, v in actor.state_dict().items()}
    bias = [k for k in state if k.endswith("bias")][-1]
    state[bias][action] = 10.0
    return state


def _plan(actor, seed: int, snapshots=("v0002", "v0003"), anchors=("anchor",)) -> dict:
    weights = {name: _biased(actor, i + 1) for i, name in enumerate((*anchors, *snapshots))}
    return {"mix": SeatMix(MIX, tuple(snapshots), tuple(anchors), LATEST), "seed": seed, "weights": weights}


def test_actor_seats_its_tables_from_the_plan_with_the_plans_networks():
    actor = _actor()
    seats = ActorSeats(actor, index=1, greedy=True, seed=0, device_slots=2)
    env = FakeLeagueEnv(tables=3)
    seats.attach(env)
    plan = _plan(actor, seed=123)
    seats.begin(plan, _biased(actor, 0))
    drawn = [env.start(t, 0) for t in range(3)]
    # The draws are the plan's mix with the plan's seed: the learner could replay them.
    expected = plan["mix"].sample(torch.Generator().manual_seed(123), 9)
    assert [n for names in drawn for n in names] == expected
    obs, mask = torch.zeros(2, 4), torch.ones(2, ACTIONS, dtype=torch.bool)
    for name in set(expected):  # each seated network acts as the plan's weights for it say
        want = 0 if name == LATEST else 1 + ("anchor", "v0002", "v0003").index(name)
        assert env.policies[name](obs, mask).tolist() == [want, want], name
    report = seats.end()
    # Actor 1 of 3-table envs: its tables are 3, 4, 5 across actors.
    assert [r["table"] for r in report["results"]] == [3, 4, 5] and {r["actor"] for r in report["results"]} == {1}
    counts = {"latest": 0, "pool": 0, "anchor": 0}
    for name in expected:
        counts["latest" if name == LATEST else "anchor" if name == "anchor" else "pool"] += 1
    assert {k: v for k, v in counts.items() if v} == report["seats"]
    assert report["builds"] == len(set(expected) - {LATEST})
    assert seats.end() == {"results": [], "seats": {}, "builds": 0}  # counted once


def test_the_latest_seat_follows_the_weights_of_each_rollout_and_left_members_are_dropped():
    actor = _actor()
    seats = ActorSeats(actor, index=0, greedy=True, seed=0, device_slots=4)
    env = FakeLeagueEnv(tables=1)
    seats.attach(env)
    obs, mask = torch.zeros(1, 4), torch.ones(1, ACTIONS, dtype=torch.bool)
    seats.begin(_plan(actor, seed=1), _biased(actor, 3))
    assert env.policies[LATEST](obs, mask).tolist() == [3]
    for game in range(20):
        env.start(0, game)
    assert "v0002" in seats._built
    seats.begin(_plan(actor, seed=2, snapshots=("v0003",)), _biased(actor, 4))  # v0002 evicted
    assert env.policies[LATEST](obs, mask).tolist() == [4]  # the same fn, new weights
    assert "v0002" not in seats._built and len(seats._built) <= 4


def test_device_slots_bound_the_networks_an_actor_keeps_built():
    actor = _actor()
    seats = ActorSeats(actor, index=0, greedy=True, seed=0, device_slots=1)
    env = FakeLeagueEnv(tables=1)
    seats.attach(env)
    seats.begin(_plan(actor, seed=7), _biased(actor, 0))
    for game in range(30):
        env.start(0, game)
    assert len(seats._built) == 1 and seats.end()["builds"] > 1


def test_an_env_that_does_not_seat_networks_is_refused():
    seats = ActorSeats(_actor(), index=0, greedy=True, seed=0, device_slots=1)
    with pytest.raises(ConfigError, match="does not seat networks"):
        seats.attach(object())
