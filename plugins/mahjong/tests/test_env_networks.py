"""Networks in MahjongEnv's opponent seats (env.opponents naming a network)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import meeple_mahjong as mj
from meeple.errors import ConfigError
from meeple_mahjong.batch_env import MahjongEnv
from meeple_native import mahjong as nm

RULES = {"east_only": True, "start_points": 8000, "return_points": 8000}  # short games: busts
SEED = 4


def preference(seed: int, oracle: bool = False):
    """A deterministic policy_fn: the legal action ranked highest by a fixed random order,
    ``pass`` last (it calls whenever it can, so calls meet the learner's decisions often).

    Row by row, so its choice does not depend on which rows share its batch."""
    prefs = torch.randperm(nm.NUM_ACTIONS, generator=torch.Generator().manual_seed(seed)).float()
    prefs[nm.PASS_ACTION] = -0.5

    def act(obs, mask):
        assert obs.shape[1:] == (84, 34) and mask.dtype == torch.bool
        return prefs.masked_fill(~mask, -1.0).argmax(-1)

    if oracle:
        def act_oracle(obs, mask, oracle_planes):
            assert oracle_planes.shape == (len(obs), nm.ORACLE_PLANES, 34) and oracle_planes.any()
            return act(obs, mask)

        act_oracle.oracle = True
        return act_oracle
    return act


def reference(tables, learner_seats, seat_fn, bots, steps):
    """Every Python seat played through one BatchSim with all of them as learner seats: per
    table, the learner's rows at each of its decisions (or game end), rewards summed since."""
    seats = sorted(seat_fn)
    sim = nm.BatchSim(tables, mj.Game(**RULES), session_seed=SEED, learner_seats=seats, bots=bots)
    n, P = sim.num_slots, len(seats)
    out = dict(obs=np.empty((n, 84, 34), np.float32), mask=np.empty((n, 155), np.uint8),
               active=np.empty(n, np.uint8), reward=np.empty(n, np.float32), done=np.empty(n, np.uint8),
               rank=np.empty(n, np.int8), score=np.empty(n, np.int32),
               oracle=np.empty((n, nm.ORACLE_PLANES, 34), np.float32))  # fmt: skip
    cols = [seats.index(s) for s in learner_seats]
    trace = [[] for _ in range(tables)]
    acc = np.zeros((tables, len(cols)), np.float32)
    started = np.zeros(tables, bool)  # rewards count from the learner's first decision (as the env)
    sim.reset(None, **out)
    together = 0
    while min(len(x) for x in trace) < steps:
        rows = {k: v.reshape(tables, P, *v.shape[1:]) for k, v in out.items()}
        for t in range(tables):
            learner_due = rows["active"][t, cols].any()
            if (learner_due or rows["done"][t, 0]) and started[t]:
                row = {k: rows[k][t, cols].copy() for k in ("obs", "mask", "done", "score", "rank")}
                trace[t].append(row | {"reward": acc[t].copy()})
                acc[t] = 0
            started[t] |= learner_due
        done = out["done"].reshape(tables, P).any(1)
        if done.any():
            sim.reset(done.astype(np.uint8), **out)
            started[done] = False
            rows = {k: v.reshape(tables, P, *v.shape[1:]) for k, v in out.items()}
            started |= rows["active"][:, cols].any(1)
        actions = np.full(n, nm.PASS_ACTION, np.int64)
        for j, s in enumerate(seats):
            idx = np.arange(tables) * P + j
            fn = seat_fn[s]
            args = [torch.from_numpy(out["obs"][idx]), torch.from_numpy(out["mask"][idx]).bool()]
            if getattr(fn, "oracle", False):
                args.append(torch.from_numpy(out["oracle"][idx]))
            actions[idx] = fn(*args).numpy()
        due = out["active"].reshape(tables, P).astype(bool)
        learner_due = due[:, cols].any(1)
        together += int((learner_due & np.delete(due, cols, axis=1).any(1)).sum())
        sim.step(actions, **out)
        r = out["reward"].reshape(tables, P)[:, cols]
        acc += np.where(started[:, None], r, 0)
    return trace, together


def play_env(env, learner_fn, steps):
    """Per table, the learner slots' rows after every env step that stepped the table."""
    T, L = env.num_tables, len(env.learner_seats)
    env.set_seed(SEED)
    td = env.reset()
    trace = [[] for _ in range(T)]
    while min(len(x) for x in trace) < steps:
        td["action"] = learner_fn(td["observation"], td["action_mask"])
        nxt = env.step(td)["next"]
        rows = {k: nxt[k].reshape(T, L, *nxt[k].shape[1:]) for k in
                ("observation", "action_mask", "reward", "done", "score", "rank")}  # fmt: skip
        for t in range(T):
            trace[t].append(dict(obs=rows["observation"][t].numpy(), mask=rows["action_mask"][t].numpy(),
                                 reward=rows["reward"][t, :, 0].numpy(), done=rows["done"][t, :, 0].numpy(),
                                 score=rows["score"][t, :, 0].numpy(), rank=rows["rank"][t, :, 0].numpy()))  # fmt: skip
        nxt["_reset"] = nxt["done"].clone()
        td = env.reset(nxt) if nxt["done"].any() else nxt
    return trace


@pytest.mark.parametrize(
    ("learner_seats", "opponents", "steps"),
    [((0,), ["a", "rule", "b"], 85), ((1, 2), ["a", "a"], 185), ((3,), ["b", "a", "c"], 95)],
)
def test_network_seats_play_the_games_of_python_played_seats(learner_seats, opponents, steps):
    """Differential: the env's network loop (held tables, network-only steps, rewards summed
    over them) against one simulator where every Python seat is a learner seat."""
    tables = 3
    fns = {"a": preference(1), "b": preference(2, oracle=True), "c": preference(3)}
    learner = preference(0)
    env = MahjongEnv(tables * len(learner_seats), learner_seats=learner_seats, opponents=opponents,
                     opponent_policies=fns, rules=RULES)  # fmt: skip
    others = [s for s in range(4) if s not in learner_seats]
    seat_fn = {s: learner for s in learner_seats}
    bots = ["random"] * 4
    for s, name in zip(others, opponents, strict=True):
        if name in fns:
            seat_fn[s] = fns[name]
        else:
            bots[s] = name
    got = play_env(env, learner, steps)
    want, together = reference(tables, learner_seats, seat_fn, bots, steps)
    games = 0
    for t in range(tables):
        for x, y in zip(got[t][:steps], want[t][:steps], strict=True):
            for k in ("obs", "mask", "done", "score", "rank"):
                np.testing.assert_array_equal(x[k], y[k], err_msg=f"table {t}: {k}")
            np.testing.assert_allclose(x["reward"], y["reward"], atol=1e-6)
            games += int(x["done"].any())
    assert games >= 1
    assert together >= 1  # network decisions due with the learner's (calls on one discard)
    # One batched call per network per simulator step, every decision counted.
    assert set(env.forwards) == set(opponents) - {"rule"}
    for name, calls in env.forwards.items():
        assert 0 < calls <= env.sim_steps and env.decisions[name] >= calls


def test_each_network_is_called_once_per_step_with_its_own_rows():
    calls = {"a": [], "b": []}

    def recording(name, seed):
        fn = preference(seed)

        def act(obs, mask):
            calls[name].append((env.sim_steps, len(obs)))
            return fn(obs, mask)

        return act

    env = MahjongEnv(8, opponents=["a", "b", "a"], rules=RULES,
                     opponent_policies={"a": recording("a", 1), "b": recording("b", 2)})  # fmt: skip
    td = env.reset()
    for _ in range(40):
        td["action"] = preference(0)(td["observation"], td["action_mask"])
        td = env.step(td)["next"]
        if td["done"].any():
            td["_reset"] = td["done"].clone()
            td = env.reset(td)
    for name, log in calls.items():
        at = [s for s, _ in log]
        assert len(at) == len(set(at)) == env.forwards[name]  # at most one call per sim step
        assert sum(n for _, n in log) == env.decisions[name]
        assert max(n for _, n in log) > 1  # rows of several tables (and seats) in one call


def test_rewards_sum_to_the_final_score_and_rank_when_games_end_on_a_network_decision():
    rank_reward = [3.0, 1.0, -1.0, -3.0]
    env = MahjongEnv(1, opponents="net", opponent_policies={"net": preference(5)}, rules=RULES,
                     rank_reward=rank_reward)  # fmt: skip
    td = env.reset()
    total, games, on_network = 0.0, 0, 0
    for _ in range(2000):
        before = env.sim_steps
        td["action"] = preference(0)(td["observation"], td["action_mask"])
        td = env.step(td)["next"]
        total += float(td["reward"])
        if td["done"].any():
            want = (int(td["score"]) - RULES["start_points"]) * 1e-4 + rank_reward[int(td["rank"])]
            assert abs(total - want) < 1e-4
            # One table: more than one simulator step means the game ended on a network's step.
            on_network += env.sim_steps - before > 1
            total, games = 0.0, games + 1
            td["_reset"] = td["done"].clone()
            td = env.reset(td)
            if games >= 4 and on_network:
                break
    assert games >= 4 and on_network >= 1


def test_bad_network_names_and_outputs_are_named():
    with pytest.raises(ConfigError, match=r"unknown bot 'x'; accepted: random, rule, rule-nofold, or a network: a"):
        MahjongEnv(1, opponents=["a", "x", "rule"], opponent_policies={"a": preference(0)})
    with pytest.raises(ConfigError, match=r"unknown bot 'a'; accepted: .* \(networks: none configured"):
        MahjongEnv(1, opponents="a")
    with pytest.raises(ConfigError, match=r"\['rule'\] are bot names"):
        MahjongEnv(1, opponents="rule", opponent_policies={"rule": preference(0)})
    with pytest.raises(ConfigError, match=r"keys path, greedy, seed, device \(path required\)"):
        MahjongEnv(1, opponents="a", opponent_checkpoints={"a": {"greedy": False}})
    env = MahjongEnv(1, learner_seats=[3], opponents="a", rules=RULES,
                     opponent_policies={"a": lambda obs, mask: torch.zeros(len(obs) + 1, dtype=torch.int64)})
    with pytest.raises(ValueError, match=r"opponent network 'a' must return an int64 tensor of shape \(1,\)"):
        env.reset()  # seats 0-2 act before seat 3
    env = MahjongEnv(1, learner_seats=[3], opponents="a", rules=RULES,
                     opponent_policies={"a": lambda obs, mask: torch.zeros(len(obs), dtype=torch.int64)})
    with pytest.raises(ValueError, match="an opponent network chose an illegal action"):
        env.reset()


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A tiny planes-ResNet checkpoint whose own config seats a network that no longer exists."""
    from meeple.checkpoint.io import save_atomic
    from meeple.nets.planes import build_planes_actor_critic

    spec_env = MahjongEnv(1)
    torch.manual_seed(0)
    actor, _ = build_planes_actor_critic(spec_env.observation_spec, spec_env.action_spec,
                                         channels=8, blocks=1, hidden=16)  # fmt: skip
    model = {"_target_": "meeple.nets.planes.build_planes_actor_critic", "_partial_": True,
             "channels": 8, "blocks": 1, "hidden": 16}  # fmt: skip
    env_cfg = {"backend": "mahjong", "learner_seats": [0], "opponents": "old",
               "opponent_checkpoints": {"old": "/nonexistent/old.pt"}}  # fmt: skip
    path = tmp_path_factory.mktemp("ckpt") / "m.pt"
    state = {"actor." + k: v for k, v in actor.state_dict().items()}
    save_atomic({"model_state_dict": state, "config": {"model": model, "env": env_cfg},
                 "checkpoint_version": 1}, path)  # fmt: skip
    return path, actor


def _trace(env, seed=SEED, steps=30):
    env.set_seed(seed)
    td = env.reset()
    obs = []
    for _ in range(steps):
        td["action"] = preference(0)(td["observation"], td["action_mask"])
        td = env.step(td)["next"]
        obs.append(td["observation"].clone())
        if td["done"].any():
            td["_reset"] = td["done"].clone()
            td = env.reset(td)
    return torch.stack(obs)


def test_config_seats_checkpoints_greedy_or_sampled(checkpoint):
    from omegaconf import OmegaConf

    from meeple_mahjong.env import backend
    from meeple_mahjong.policy import greedy_policy

    path, actor = checkpoint
    cfg = OmegaConf.create({"backend": "mahjong", "opponents": ["ck", "rule", "ck"], "rules": RULES,
                            "opponent_checkpoints": {"ck": str(path), "unused": "/nonexistent.pt"}})  # fmt: skip
    env = backend.make_env(cfg, num_envs=2)
    direct = MahjongEnv(2, opponents=["ck", "rule", "ck"], rules=RULES,
                        opponent_policies={"ck": greedy_policy(actor)})  # fmt: skip
    assert torch.equal(_trace(env), _trace(direct))  # the checkpoint's greedy policy plays
    assert env.decisions["ck"] > 0 and env.forwards["ck"] <= env.sim_steps

    def sampled(seed):
        c = OmegaConf.merge(cfg, {"opponent_checkpoints": {"ck": {"path": str(path), "greedy": False,
                                                                  "seed": seed}}})  # fmt: skip
        return _trace(backend.make_env(c, num_envs=2))

    torch.manual_seed(123)
    a = sampled(1)
    torch.manual_seed(456)  # the global RNG plays no part
    assert torch.equal(a, sampled(1)) and not torch.equal(a, sampled(2))
    assert not torch.equal(a, _trace(env))
