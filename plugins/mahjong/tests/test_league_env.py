"""``env.league: true`` (meeple_mahjong.league_env): rotation, seating per game, results."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import meeple_mahjong as mj
from meeple.errors import ConfigError
from meeple_mahjong.env import backend
from meeple_mahjong.league_env import LEARNER, LeagueEnv
from meeple_native import mahjong as nm

RULES = {"east_only": True, "start_points": 8000, "return_points": 8000}  # short games: busts
SEED = 5
NAMES = ("a", "b", "c")


class Fake:
    """A deterministic policy fn that records its calls: per row, the legal action ranked
    highest by a fixed random order of its own (``pass`` last, so it calls whenever it can).
    Row by row, so its choices do not depend on which rows share its batch."""

    def __init__(self, seed: int, env: LeagueEnv | None = None, oracle: bool = False) -> None:
        self.prefs = torch.randperm(nm.NUM_ACTIONS, generator=torch.Generator().manual_seed(seed)).float()
        self.prefs[nm.PASS_ACTION] = -0.5
        self.env = env
        self.oracle = oracle  # an oracle policy is handed the oracle planes too
        self.calls: list[tuple[int, int]] = []  # (env.sim_steps at the call, rows)

    def __call__(self, obs: torch.Tensor, mask: torch.Tensor, planes: torch.Tensor | None = None) -> torch.Tensor:
        assert obs.shape[1:] == (84, 34) and mask.dtype == torch.bool and len(obs) == len(mask)
        assert (planes is not None) == self.oracle
        assert planes is None or (planes.shape == (len(obs), nm.ORACLE_PLANES, 34) and planes.any())
        self.calls.append((self.env.sim_steps if self.env else -1, len(obs)))
        return self.prefs.masked_fill(~mask, -1.0).argmax(-1)


def seating(table: int, game: int) -> list[str]:
    """A league's choice that varies with the table and the game (a network may sit twice)."""
    return [NAMES[(table + game) % 3], NAMES[(2 * table + game + 1) % 3], NAMES[game % 2]]


def league(tables: int, fns: dict, seat=seating, **kw) -> LeagueEnv:
    env = LeagueEnv(tables, rules=RULES, **kw)
    env.set_league(fns, seat)
    env.set_seed(SEED)
    return env


def play(env: LeagueEnv, learner, games: int, max_steps: int = 20000):
    """Steps until every table has finished ``games`` games; per table, the (seat, rank,
    reward summed over the game) the env reported at each game end."""
    td = env.reset()
    ends = [[] for _ in range(env.num_tables)]
    total = torch.zeros(env.num_tables)
    for _ in range(max_steps):
        if min(len(e) for e in ends) >= games:
            return ends
        assert td["active"].all()  # one learner slot per table: it always has a decision
        td["action"] = learner(td["observation"], td["action_mask"])
        td = env.step(td)["next"]
        total += td["reward"][:, 0]
        for t in td["done"][:, 0].nonzero().flatten().tolist():
            ends[t].append((int(td["seat"][t]), int(td["rank"][t]), float(total[t]), int(td["score"][t])))
            total[t] = 0
        if td["done"].any():
            td["_reset"] = td["done"].clone()
            td = env.reset(td)
    raise AssertionError(f"fewer than {games} games per table in {max_steps} steps")


def test_learner_seat_rotates_per_table_and_game_and_results_match_the_env():
    rank_reward = [3.0, 1.0, -1.0, -3.0]
    env = league(5, {n: Fake(i + 1) for i, n in enumerate(NAMES)}, rank_reward=rank_reward)
    td = env.reset()
    assert td["seat"].flatten().tolist() == [0, 1, 2, 3, 0]  # game 0: (table + 0) % 4
    env.set_seed(SEED)  # a new simulator: its tables count their games from 0 again
    ends = play(env, Fake(0), games=5)
    results = env.pop_results()
    assert env.pop_results() == []  # popped once
    by_table = {t: [r for r in results if r["table"] == t] for t in range(5)}
    for t, rs in by_table.items():
        assert [r["game"] for r in rs] == list(range(len(rs))) and len(rs) == len(ends[t])
        for k, (r, (seat, rank, total, score)) in enumerate(zip(rs, ends[t], strict=True)):
            assert seat == r["learner_seat"] == (t + k) % 4
            assert sorted(r["ranks"]) == [0, 1, 2, 3]
            assert r["ranks"][seat] == rank and r["scores"][seat] == score
            assert sum(r["scores"]) == 4 * RULES["start_points"]  # riichi sticks paid out at the end
            want = [LEARNER] * 4
            for i, name in enumerate(seating(t, k)):
                want[(seat + 1 + i) % 4] = name
            assert r["players"] == want
            # The learner's rewards over the game: score change and placement (network-only
            # steps included); a hand that ends before its first decision is the documented gap.
            assert total == pytest.approx((score - RULES["start_points"]) * 1e-4 + rank_reward[rank], abs=1e-4)


def reference_results(tables: int, fns: dict, learner, games: int) -> list[dict]:
    """The league's games played by hand: one BatchSim with every seat Python-driven, each
    pending seat acting with the policy ``seating`` put there, row by row."""
    sim = nm.BatchSim(tables, mj.Game(**RULES), session_seed=SEED, learner_seats=[0, 1, 2, 3],
                      bots=["random"] * 4)  # fmt: skip
    n = 4 * tables
    out = dict(obs=np.empty((n, 84, 34), np.float32), mask=np.empty((n, 155), np.uint8),
               active=np.empty(n, np.uint8), done=np.empty(n, np.uint8), rank=np.empty(n, np.int8),
               score=np.empty(n, np.int32))  # fmt: skip
    game = [0] * tables
    players = [None] * tables

    def seat(t):
        learner_seat = (t + game[t]) % 4
        players[t] = [LEARNER] * 4
        for i, name in enumerate(seating(t, game[t])):
            players[t][(learner_seat + 1 + i) % 4] = name

    for t in range(tables):
        seat(t)
    sim.reset(None, **out)
    results = []
    while min(game) < games:
        actions = np.full(n, nm.PASS_ACTION, np.int64)
        for i in np.flatnonzero(out["active"]):
            fn = learner if players[i // 4][i % 4] == LEARNER else fns[players[i // 4][i % 4]]
            obs, mask = torch.from_numpy(out["obs"][i : i + 1]), torch.from_numpy(out["mask"][i : i + 1]).bool()
            actions[i] = int(fn(obs, mask)[0])
        sim.step(actions, **out)
        done = out["done"].reshape(tables, 4).any(1)
        for t in np.flatnonzero(done):
            results.append({"table": int(t), "game": game[t], "players": players[t],
                            "ranks": out["rank"][4 * t : 4 * t + 4].tolist(),
                            "scores": out["score"][4 * t : 4 * t + 4].tolist()})  # fmt: skip
            game[t] += 1
            seat(t)
        if done.any():
            sim.reset(done.astype(np.uint8), **out)
    return results


def test_each_decision_is_made_by_the_network_seated_there_in_one_call_per_step():
    """Differential: the same games played seat by seat with the policies ``seating`` names
    (so every decision went to its seat's network), and each network called once per
    simulator step on the rows of all its tables ("c" reads the oracle planes)."""
    tables, games = 4, 3
    env = LeagueEnv(tables, rules=RULES)
    fns = {n: Fake(i + 1, env, oracle=n == "c") for i, n in enumerate(NAMES)}
    env.set_league(fns, seating)
    env.set_seed(SEED)
    play(env, Fake(0), games)

    def by_game(results):
        return {(r["table"], r["game"]): {k: r[k] for k in ("players", "ranks", "scores")} for r in results}

    got = by_game(env.pop_results())
    want = by_game(reference_results(tables, {n: Fake(i + 1) for i, n in enumerate(NAMES)}, Fake(0), games))
    assert len(want) >= tables * games and {k: got[k] for k in want} == want
    for name, fn in fns.items():
        steps = [s for s, _ in fn.calls]
        assert len(steps) == len(set(steps)) == env.forwards[name] <= env.sim_steps  # one call per sim step
        assert sum(rows for _, rows in fn.calls) == env.decisions[name] > 0
        assert max(rows for _, rows in fn.calls) > 1  # rows of several tables (or seats) batched


def test_same_seed_same_results_and_another_seed_other_games():
    def results(seed):
        env = league(3, {n: Fake(i + 1) for i, n in enumerate(NAMES)})
        env.set_seed(seed)
        play(env, Fake(0), games=2)
        return env.pop_results()

    a = results(SEED)
    assert a == results(SEED) and a != results(SEED + 1)


def test_update_policy_plays_the_next_decisions_and_adds_networks():
    env = league(4, {"a": Fake(1), "b": Fake(2)}, seat=lambda t, k: ["a", "b", "a"] if k < 1 else ["c"] * 3)
    td = env.reset()
    for _ in range(5):
        td["action"] = Fake(0)(td["observation"], td["action_mask"])
        td = env.step(td)["next"]
    assert env.decisions["a"] > 0
    new_a = Fake(7, env)
    env.update_policy("a", new_a)
    env.update_policy("c", Fake(3))
    before = env.decisions["a"]
    for _ in range(5):
        td["action"] = Fake(0)(td["observation"], td["action_mask"])
        td = env.step(td)["next"]
    assert env.decisions["a"] > before and sum(r for _, r in new_a.calls) == env.decisions["a"] - before
    play(env, Fake(0), games=1)  # game 1 at every table seats "c", added after the first reset
    assert env.decisions["c"] > 0
    assert {r["players"].count("c") for r in env.pop_results() if r["game"] == 1} == {3}


def test_torchrl_rollout_and_collector_through_the_backend():
    from tensordict.nn import TensorDictModule
    from torchrl.collectors import Collector

    from meeple.env_factory import make_env

    cfg = {"backend": "mahjong", "league": True, "learner_seats": [0], "opponents": "rule", "rules": RULES}
    assert backend.batch_unit(cfg) == 1
    env = make_env(cfg, num_envs=3, seed=SEED)
    assert isinstance(env.base_env, LeagueEnv)
    env.base_env.set_league({n: Fake(i + 1) for i, n in enumerate(NAMES)}, seating)
    rollout = env.rollout(400, break_when_any_done=False)  # random legal actions, partial resets
    assert rollout.batch_size == (3, 400) and rollout["next", "done"].any()
    assert len(env.base_env.pop_results()) == int(rollout["next", "done"].sum())

    first_legal = TensorDictModule(lambda mask: mask.float().argmax(-1), in_keys=["action_mask"],
                                   out_keys=["action"])  # fmt: skip
    env = make_env(cfg, num_envs=3, seed=SEED)
    env.base_env.set_league({n: Fake(i + 1) for i, n in enumerate(NAMES)}, seating)  # before: it resets
    collector = Collector(env, first_legal, frames_per_batch=300, total_frames=-1)
    batch = next(iter(collector))
    collector.shutdown()
    assert batch.numel() == 300 and batch["next", "reward"].abs().sum() > 0


def test_bad_league_options_and_answers_are_named():
    with pytest.raises(ConfigError, match=r"env.learner_seats=\[0, 1\] with env.league=true; accepted: one seat"):
        LeagueEnv(2, learner_seats=[0, 1])
    with pytest.raises(ConfigError, match="env.opponent_checkpoints with env.league=true"):
        backend.make_env({"league": True, "opponent_checkpoints": {"x": "x.pt"}}, num_envs=1)
    env = LeagueEnv(2, rules=RULES)
    with pytest.raises(ValueError, match=r"call env.set_league\(policies, seat\) before the first reset"):
        env.reset()
    with pytest.raises(ValueError, match="network name 'learner'; accepted: a non-empty string other than"):
        env.update_policy(LEARNER, Fake(0))
    with pytest.raises(ValueError, match="policies is empty"):
        env.set_league({}, seating)
    env.set_league({"a": Fake(1)}, lambda t, k: ["a", "a"])
    with pytest.raises(ValueError, match=r"seat\(0, 0\) returned \['a', 'a'\]; accepted: 3 network names for "
                                         r"seats \[1, 2, 3\] \(the learner sits in seat 0\), .*: a"):
        env.reset()
    env.set_league({"a": Fake(1)}, lambda t, k: ["a", "zz", "a"] if t == 1 else ["a"] * 3)
    with pytest.raises(ValueError, match=r"seat\(1, 0\) returned \['a', 'zz', 'a'\]"):
        env.reset()
    env.set_league({"a": Fake(1)}, lambda t, k: ["a"] * 3)
    assert env.reset()["seat"].flatten().tolist() == [0, 1]  # the failed resets started no game
    oracle = Fake(2)
    oracle.oracle = True
    with pytest.raises(ValueError, match="'o' is an oracle policy .* only through set_league before the first reset"):
        env.update_policy("o", oracle)
