"""The action space, the batch simulator and ``env=mahjong``: determinism, reward bookkeeping,
bad input."""

import random

import numpy as np
import pytest
import torch

import meeple_mahjong as mj
from meeple.errors import ConfigError
from meeple_mahjong.batch_env import MahjongEnv
from meeple_native import mahjong as nm

N = nm.NUM_ACTIONS


def test_every_legal_action_has_its_own_index_and_maps_back():
    rng = random.Random(3)
    g = mj.Game()
    kinds = set()
    for game in range(6):
        g.reset(9, game)
        while not g.is_done():
            for seat in g.pending():
                legal = g.legal_actions(seat)
                mask = nm.legal_mask(g, seat)
                idx = [nm.action_index(a) for a in legal]
                assert len(set(idx)) == len(idx) == mask.sum()  # distinct indices, all in the mask
                assert all(mask[i] for i in idx)
                for a, i in zip(legal, idx, strict=True):
                    assert nm.action_from_index(g, seat, i) == a
                    kinds.add((a.type, i // 37 if i < 74 else i))
            seat = g.pending()[0]
            g.step(seat, rng.choice(g.legal_actions(seat)))
    assert {t for t, _ in kinds} >= {"discard", "riichi", "pass", "pon", "chi"}


def test_action_layout_matches_the_documented_ranges():
    g = mj.Game()
    g.reset(1, 0)
    seat = g.pending()[0]
    for a in g.legal_actions(seat):
        i = nm.action_index(a)
        if a.type == "discard":
            red = a.tile in (16, 52, 88)
            assert i == (34 + a.tile // 36 if red else a.tile // 4)
    assert nm.action_index(mj.Action("pass")) == nm.PASS_ACTION == 153
    with pytest.raises(ValueError, match="not legal"):
        nm.action_from_index(g, seat, nm.PASS_ACTION)
    with pytest.raises(ValueError, match=r"\[0, 155\)"):
        nm.action_from_index(g, seat, 155)


class Buffers:
    def __init__(self, slots: int):
        self.out = dict(
            obs=np.zeros((slots, 84, 34), np.float32),
            mask=np.zeros((slots, N), np.uint8),
            active=np.zeros(slots, np.uint8),
            reward=np.zeros(slots, np.float32),
            done=np.zeros(slots, np.uint8),
            rank=np.zeros(slots, np.int8),
            score=np.zeros(slots, np.int32),
        )

    def __getattr__(self, name):
        return self.out[name]


def _sim(tables, seats=(0,), bots="random", threads=1, seed=5, east_only=True):
    return nm.BatchSim(tables, mj.Game(east_only=east_only), session_seed=seed, learner_seats=list(seats),
                       bots=[bots] * 4, threads=threads)  # fmt: skip


def _policy_actions(mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    # Uniform among legal indices, one draw per slot.
    return np.array([rng.choice(np.flatnonzero(m)) for m in mask], np.int64)


def _play(sim, steps, seed=0):
    """Steps with per-table random legal actions; resets finished tables. Returns per-step traces."""
    b = Buffers(sim.num_slots)
    sim.reset(None, **b.out)
    L = len(sim.learner_seats)
    rngs = [np.random.default_rng([seed, t]) for t in range(sim.num_tables)]
    trace = []
    for _ in range(steps):
        actions = np.concatenate(
            [_policy_actions(b.mask[t * L : (t + 1) * L], rngs[t]) for t in range(sim.num_tables)]
        )
        sim.step(actions, **b.out)
        trace.append({k: v.copy() for k, v in b.out.items()})
        if b.done.any():
            sim.reset(b.done.reshape(-1, L).any(1).astype(np.uint8), **b.out)
    return trace


def test_same_seed_same_games_whatever_the_thread_count_and_table_count():
    a = _play(_sim(4, seats=(1, 3), threads=1), 400)
    b = _play(_sim(4, seats=(1, 3), threads=3), 400)
    for x, y in zip(a, b, strict=True):
        for k in x:
            np.testing.assert_array_equal(x[k], y[k])
    # Table t's games do not depend on how many tables run beside it.
    c = _play(_sim(2, seats=(1, 3), threads=2), 400)
    for x, y in zip(a, c, strict=True):
        for k in x:
            np.testing.assert_array_equal(x[k][:4], y[k])
    other_seed = _play(_sim(4, seats=(1, 3), seed=6), 50)
    assert any((x["obs"] != y["obs"]).any() for x, y in zip(a, other_seed, strict=False))


@pytest.mark.parametrize("seats", [(0,), (0, 2), (0, 1, 2, 3)])
def test_rewards_add_up_to_the_final_score_and_rank(seats):
    tables, rank_reward = 3, [3.0, 1.0, -1.0, -3.0]
    sim = nm.BatchSim(tables, mj.Game(east_only=True), session_seed=2, learner_seats=list(seats),
                      bots=["rule"] * 4, threads=2, score_scale=1e-4, rank_reward=rank_reward)  # fmt: skip
    L = len(seats)
    b = Buffers(sim.num_slots)
    sim.reset(None, **b.out)
    total = np.zeros(sim.num_slots)
    games = 0
    rng = np.random.default_rng(0)
    while games < 6:
        # Inactive slots may act only 'pass' (their no-op); every table waits on some learner seat.
        inactive = b.active == 0
        assert (b.mask[inactive].sum(1) == 1).all() and b.mask[inactive, nm.PASS_ACTION].all()
        assert b.active.reshape(tables, L).any(1).all()
        sim.step(_policy_actions(b.mask, rng), **b.out)
        total += b.reward
        done = b.done.reshape(tables, L)
        assert (done.all(1) == done.any(1)).all()  # a table's slots end together
        for t in np.flatnonzero(done.any(1)):
            rows = slice(t * L, (t + 1) * L)
            expected = (b.score[rows] - 25000) * 1e-4 + np.take(rank_reward, b.rank[rows])
            np.testing.assert_allclose(total[rows], expected, atol=1e-4)
            assert len(set(b.rank[rows])) == L and (b.rank[rows] >= 0).all()
            order = np.argsort(-b.score[rows], kind="stable")
            assert (np.diff(b.rank[rows][order]) > 0).all()  # higher score, better rank
            if L == 4:
                assert b.score[rows].sum() == 100000
            total[rows] = 0
            games += 1
        assert (b.rank[~b.done.astype(bool)] == -1).all()
        if done.any():
            sim.reset(done.any(1).astype(np.uint8), **b.out)
            assert (b.reward[np.repeat(done.any(1), L)] == 0).all()
    assert sim.games_finished == games


def test_illegal_action_changes_nothing_and_names_the_slot():
    sim = _sim(2, seats=(0,), bots="rule")
    b = Buffers(2)
    sim.reset(None, **b.out)
    before = [
        (sim.game(t).hand(0), sim.game(t).tiles_left, sim.game(t).pending()) for t in range(2)
    ]
    bad = np.array([np.flatnonzero(b.mask[0])[0], np.flatnonzero(b.mask[1] == 0)[0]], np.int64)
    with pytest.raises(
        ValueError, match=r"slot 1 \(table 1, seat 0\): action \d+ is not legal; legal indices"
    ):
        sim.step(bad, **b.out)
    after = [(sim.game(t).hand(0), sim.game(t).tiles_left, sim.game(t).pending()) for t in range(2)]
    assert before == after  # table 0's legal action was not applied either


def test_bad_arrays_and_configs_are_named():
    sim = _sim(2)
    b = Buffers(2)
    with pytest.raises(
        ValueError,
        match=r"obs: expected a C-contiguous float32 CPU array of shape \(2, 84, 34\), got shape \(2, 84, 33\)",
    ):
        sim.reset(None, np.zeros((2, 84, 33), np.float32), b.mask)
    with pytest.raises(TypeError):
        sim.reset(None, b.obs.astype(np.float64), b.mask)  # wrong dtype: nanobind refuses the array
    with pytest.raises(ValueError, match="reset it first"):
        sim.step(np.zeros(2, np.int64), **b.out)  # no game started yet
    for kwargs, msg in (
        (dict(learner_seats=[0, 0]), "given twice"),
        (dict(learner_seats=[4]), "not in 0..3"),
        (dict(bots=["rule", "bad", "rule", "rule"]), "unknown bot 'bad'"),
        (dict(threads=0), "threads must be >= 1"),
    ):
        with pytest.raises(ValueError, match=msg):
            nm.BatchSim(2, mj.Game(), **kwargs)
    with pytest.raises(ValueError, match="num_tables must be >= 1"):
        nm.BatchSim(0, mj.Game())


def test_env_configuration_errors():
    for kwargs, msg in (
        (dict(num_envs=3, learner_seats=[0, 1]), "multiple of len\\(learner_seats\\)=2"),
        (dict(num_envs=2, learner_seats=[0, 5]), "1 to 4 distinct seats"),
        (
            dict(num_envs=2, opponents="smart"),
            "unknown bot 'smart'; accepted: random, rule, rule-nofold",
        ),
        (
            dict(num_envs=2, opponents=["rule", "rule"]),
            "one per other seat \\(3 for learner seats \\[0\\]\\)",
        ),
        (dict(num_envs=2, rules={"east_onyl": True}), "unknown option\\(s\\) \\['east_onyl'\\]"),
        (dict(num_envs=2, rank_reward=[1, 0]), "4 numbers"),
    ):
        with pytest.raises(ConfigError, match=msg):
            MahjongEnv(**kwargs)


def test_env_partial_reset_restarts_only_finished_tables():
    from torchrl.envs.utils import check_env_specs

    env = MahjongEnv(4, learner_seats=[0, 2], opponents="random", rules={"east_only": True})
    check_env_specs(env)
    env.set_seed(3)
    td = env.reset()
    assert td["observation"].shape == (4, 84, 34) and td["action_mask"].dtype == torch.bool
    assert td["seat"].squeeze(-1).tolist() == [0, 2, 0, 2]
    td["action"] = env.rand_action(td)["action"]
    td = env.step(td)["next"]
    before = [(env.sim.game(t).hand(0), env.sim.game(t).tiles_left) for t in range(2)]
    td["_reset"] = torch.tensor([[True], [True], [False], [False]])
    env.reset(td)
    assert env.sim.game(0).hand(0) != before[0][0]  # table 0 plays its next game (a new wall)
    assert (env.sim.game(1).hand(0), env.sim.game(1).tiles_left) == before[1]  # table 1 untouched


def _rows(b, t, L):
    return {k: v[t * L : (t + 1) * L].copy() for k, v in b.out.items()}


def test_held_tables_keep_their_state_and_resume_the_same_game():
    """step(..., tables=m) holds tables with m[t] == 0: rows not written but reward 0 and
    done 0, nothing applied (their actions are not even checked); each table's game is the
    one it plays when never held."""
    tables, seats, steps = 3, (1, 3), 200
    L = len(seats)

    def run(hold_rng):
        sim = _sim(tables, seats=seats, bots="rule")
        b = Buffers(sim.num_slots)
        sim.reset(None, **b.out)
        rngs = [np.random.default_rng([0, t]) for t in range(tables)]
        trace = [[] for _ in range(tables)]
        while min(len(x) for x in trace) < steps:
            go = np.array([len(trace[t]) < steps for t in range(tables)])
            if hold_rng is not None:
                go &= hold_rng.random(tables) < 0.5
            actions = np.full(sim.num_slots, -1, np.int64)  # held tables: illegal, never read
            for t in np.flatnonzero(go):
                actions[t * L : (t + 1) * L] = _policy_actions(b.mask[t * L : (t + 1) * L], rngs[t])
            before = {t: (_rows(b, t, L), sim.game(t).hand(0), sim.game(t).pending()) for t in np.flatnonzero(~go)}
            sim.step(actions, **b.out, tables=go.astype(np.uint8))
            for t in range(tables):
                if go[t]:
                    trace[t].append(_rows(b, t, L))
                    continue
                rows, hand, pending = before[t]
                assert (sim.game(t).hand(0), sim.game(t).pending()) == (hand, pending)
                now = _rows(b, t, L)
                assert not now["reward"].any() and not now["done"].any()
                for k in ("obs", "mask", "active", "score"):
                    np.testing.assert_array_equal(now[k], rows[k])
            done = b.done.reshape(tables, L).any(1)
            if done.any():
                sim.reset(done.astype(np.uint8), **b.out)
        return trace

    never_held = run(None)
    held = run(np.random.default_rng(1))
    for a, b in zip(never_held, held, strict=True):
        assert sum(r["done"].any() for r in a[:steps]) >= 1  # the traces cross a game's end
        for x, y in zip(a[:steps], b[:steps], strict=True):
            for k in x:
                np.testing.assert_array_equal(x[k], y[k])


def test_held_finished_table_keeps_its_rank_and_bad_masks_are_named():
    sim = _sim(2)
    b = Buffers(2)
    sim.reset(None, **b.out)
    rng = np.random.default_rng(0)
    while not b.done[0]:  # play table 0 to its game's end, table 1 held throughout
        sim.step(_policy_actions(b.mask, rng), **b.out, tables=np.array([1, 0], np.uint8))
    rank, score = b.rank[0], b.score[0]
    sim.step(_policy_actions(b.mask, rng), **b.out, tables=np.array([0, 1], np.uint8))
    assert (b.rank[0], b.score[0], b.done[0], b.active[0]) == (rank, score, 0, 0)
    assert b.rank[1] == -1
    with pytest.raises(ValueError, match="reset it first"):
        sim.step(_policy_actions(b.mask, rng), **b.out, tables=np.array([1, 1], np.uint8))
    with pytest.raises(ValueError, match=r"tables: expected a C-contiguous uint8/bool CPU array of shape \(2\), got shape \(3\)"):
        sim.step(_policy_actions(b.mask, rng), **b.out, tables=np.ones(3, np.uint8))
