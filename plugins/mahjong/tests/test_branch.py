"""Branched action values (meeple_mahjong.branch, ``env.branch``) and the module that learns from
them (meeple_mahjong.branch_ppo): a branch is an exact copy of its table, so the branch of the
action the game then took replays that game's hand; the all-action surrogate moves mass toward
the candidate that kept more points; bad options fail in one line."""

import copy

import numpy as np
import pytest
import torch
from torchrl.envs.utils import step_mdp

from meeple.checkpoint.callback import load_gate
from meeple.checkpoint.io import load_verified
from meeple.errors import ConfigError
from meeple_mahjong.batch_env import MahjongEnv
from meeple_mahjong.branch import BranchOptions, crn_sample, top_candidates
from meeple_mahjong.branch_ppo import BranchPPOModule, branch_surrogate
from meeple_native import mahjong as mj

NA = mj.NUM_ACTIONS


def lowest_legal(obs, mask):
    """A deterministic policy as masked logits: the lowest legal action index, always."""
    return (-1000.0 * torch.arange(NA, dtype=torch.float32)).expand(len(obs), -1).masked_fill(~mask, float("-inf"))


def _buffers(n):
    return dict(obs=np.zeros((n, 84, 34), np.float32), mask=np.zeros((n, NA), np.uint8),
                active=np.zeros(n, np.uint8), reward=np.zeros(n, np.float32), done=np.zeros(n, np.uint8),
                rank=np.zeros(n, np.int8), score=np.zeros(n, np.int32))  # fmt: skip


def test_a_copied_table_plays_on_exactly_as_its_source():
    rng = np.random.default_rng(0)
    src = mj.BatchSim(6, mj.Game(), session_seed=5)
    dst = mj.BatchSim(6, mj.Game(), session_seed=99)  # its own seed is irrelevant to copies
    a, b = _buffers(6), _buffers(6)
    src.reset(None, **a)
    for _ in range(20):
        src.step(np.array([rng.choice(np.flatnonzero(m)) for m in a["mask"]], np.int64), **a)
    dst.copy_tables(src, np.arange(6, dtype=np.int32)[::-1].copy(), **b)
    assert (b["obs"][::-1] == a["obs"]).all() and (b["mask"][::-1] == a["mask"]).all()
    assert (b["reward"] == 0).all() and dst.hands_played() == src.hands_played()[::-1]
    for _ in range(60):
        if a["done"].any():
            break
        act = np.array([rng.choice(np.flatnonzero(m)) for m in a["mask"]], np.int64)
        src.step(act, **a)
        dst.step(act[::-1].copy(), **b)
        for k in a:
            assert (b[k][::-1] == a[k]).all(), k
    idle = mj.BatchSim(6, mj.Game())
    out = _buffers(6)
    idle.copy_tables(src, np.array([-1, 0, -1, 1, 2, 3], np.int32), **out)
    assert list(out["active"][[0, 2]]) == [0, 0] and out["mask"][0].nonzero()[0].tolist() == [mj.PASS_ACTION]


def test_copy_tables_refuses_what_it_cannot_copy():
    src = mj.BatchSim(4, mj.Game())
    with pytest.raises(ValueError, match=r"source table 7 of table 0 is not in \[0, 4\)"):
        mj.BatchSim(4, mj.Game()).copy_tables(src, np.full(4, 7, np.int32), **_buffers(4))
    with pytest.raises(ValueError, match="other learner seats, bots or rewards"):
        mj.BatchSim(4, mj.Game(), learner_seats=[2]).copy_tables(src, np.arange(4, dtype=np.int32), **_buffers(4))
    with pytest.raises(ValueError, match="explicit games takes no copies"):
        mj.BatchSim(1, mj.Game(), games=[(0, 0, 0)]).copy_tables(src, np.zeros(1, np.int32), **_buffers(1))


def test_a_redeal_shuffles_only_the_tiles_no_seat_has_seen():
    """Game.redeal_wall keeps every tile, every seat's view (hands, ponds, shown dora: the public
    planes of each seat and its legal actions) and the drawn part of the wall; it moves the undrawn
    tiles, by its seed; BatchSim.redeal does it on the tables it is told."""
    rng = np.random.default_rng(1)
    g = mj.Game()
    g.reset(7, 0)
    for _ in range(30):  # into the hand: some tiles drawn, some discarded
        seat = g.pending()[0]
        g.step(seat, g.legal_actions(seat)[rng.integers(len(g.legal_actions(seat)))])
    before, view = g.wall_tiles, [(g.hand(s), g.discards(s), mj.encode_public(g, s)) for s in range(4)]
    a, b = copy.copy(g), copy.copy(g)
    a.redeal_wall(1)
    b.redeal_wall(1)
    assert a.wall_tiles == b.wall_tiles != before and sorted(a.wall_tiles) == sorted(before)
    drawn = g.draw_pos
    assert a.wall_tiles[:drawn] == before[:drawn] and a.dora_indicators == g.dora_indicators
    for s in range(4):
        h, d, planes = view[s]
        assert a.hand(s) == h and a.discards(s) == d and (mj.encode_public(a, s) == planes).all()
        assert a.legal_actions(s) == g.legal_actions(s)
    c = copy.copy(g)
    c.redeal_wall(2)
    assert c.wall_tiles != a.wall_tiles

    sim = mj.BatchSim(3, mj.Game(), session_seed=5)
    out = _buffers(3)
    sim.reset(None, **out)
    walls = [sim.game(t).wall_tiles for t in range(3)]
    sim.redeal(np.array([1, 0, 1], np.uint8), np.array([4, 4, 9], np.uint64))
    now = [sim.game(t).wall_tiles for t in range(3)]
    assert now[1] == walls[1] and now[0] != walls[0] and now[2] != walls[2]
    assert all(sorted(x) == sorted(y) for x, y in zip(now, walls, strict=True))


def test_redealt_branches_average_the_luck_of_the_draws():
    """With redeals, a candidate's value is the mean over shuffles of the unseen tiles: a
    deterministic policy's values differ from the real wall's (one wall) and stay within the
    hand's reward range; a policy that reads the oracle planes, which show the wall, is refused."""
    plain = MahjongEnv(8, branch={"prob": 1.0, "candidates": 2, "tables": 64})
    dealt = MahjongEnv(8, branch={"prob": 1.0, "candidates": 2, "tables": 64, "redeals": 4})
    values = []
    for env in (plain, dealt):
        env.set_branch_policy(lowest_legal)
        env.set_seed(3)
        td, got = env.reset(), []
        for _ in range(40):
            got.append(td["branch_value"][td["branch_mask"]])
            td["action"] = lowest_legal(td["observation"], td["action_mask"]).argmax(-1)
            td = step_mdp(env.step(td))
        values.append(torch.cat(got))
    assert len(values[0]) == len(values[1]) > 100 and not torch.equal(values[0], values[1])
    assert values[1].abs().max() < 5 and dealt.branch_counts["copies"] == 4 * plain.branch_counts["copies"]

    def oracle(obs, mask, planes):
        return lowest_legal(obs, mask)

    oracle.oracle = True
    with pytest.raises(ConfigError, match="redeals > 1 with a policy that reads the oracle planes"):
        MahjongEnv(4, branch={"prob": 1.0, "redeals": 2}).set_branch_policy(oracle)
    with pytest.raises(ConfigError, match="redeals >= 1"):
        BranchOptions.parse({"redeals": 0})


# integer weights on 0/1 planes: logits exact in float32 whatever rows are batched together
_W = torch.randint(-3, 4, (84 * 34, NA), generator=torch.Generator().manual_seed(0)).float()


def integer_linear(obs, mask):
    """A stochastic policy as masked logits (softmax over small integers), argmax exactly reproducible."""
    return (obs.flatten(1) @ _W).masked_fill(~mask, float("-inf"))


@pytest.mark.parametrize("policy,continuation", [(lowest_legal, "sample"), (integer_linear, "greedy")])
def test_the_branch_of_the_action_taken_is_the_hand_the_game_then_played(policy, continuation):
    """Where the copies play what the game plays, every branch of a candidate is the game's own
    hand: the value the env wrote for the action the game then took equals the rewards the game
    paid from that decision to the hand's end (scores to the point, and the rank bonus at a game's
    end). Two ways: a deterministic policy sampled, and a stochastic policy whose copies play its
    argmax (``continuation: greedy``) in a game that plays its argmax too."""
    env = MahjongEnv(16, branch={"prob": 1.0, "candidates": 3, "tables": 48, "continuation": continuation})
    env.set_branch_policy(policy)
    env.set_seed(3)
    td = env.reset()
    open_, checked, nonzero = [], 0, 0
    for _ in range(200):
        mask, bm = td["action_mask"], td["branch_mask"]
        action = policy(td["observation"], mask).argmax(-1)
        assert (bm.sum(-1) == torch.minimum(mask.sum(-1), torch.tensor(3)).where(mask.sum(-1) >= 2, 0)).all()
        hands = env.sim.hands_played()
        for t in torch.nonzero(bm.any(-1)).squeeze(-1).tolist():
            assert bm[t, action[t]]  # the game's action is among the candidates (the most likely)
            open_.append([t, hands[t], float(td["branch_value"][t, action[t]]), 0.0])
        td["action"] = action
        stepped = env.step(td)
        nxt = stepped["next"]
        reward, done = nxt["reward"].squeeze(-1), nxt["done"].squeeze(-1)
        now, still = env.sim.hands_played(), []
        for item in open_:
            t = item[0]
            item[3] += float(reward[t])
            if done[t] or now[t] != item[1]:
                assert item[3] == pytest.approx(item[2], abs=1e-6), item
                checked += 1
                nonzero += item[2] != 0
            else:
                still.append(item)
        open_ = still
        if done.any():
            break
        td = step_mdp(stepped)
    assert checked >= 300 and nonzero >= 30, (checked, nonzero)
    counts = env.branch_counts
    assert counts["copies"] > checked and counts["truncated"] == 0


def test_copies_of_one_decision_draw_alike_and_by_the_policy():
    logits = torch.tensor([[0.0, 1.0, float("-inf"), 2.0]]).expand(20_000, -1)
    u = torch.rand(20_000, generator=torch.Generator().manual_seed(0))
    a = crn_sample(logits, u)
    assert (crn_sample(logits, u) == a).all() and not (a == 2).any()  # same draws, never illegal
    freq = torch.bincount(a, minlength=4).float() / len(a)
    assert torch.allclose(freq, logits[0].softmax(-1), atol=0.01)
    assert crn_sample(logits[:1], torch.zeros(1)).item() == 0  # u = 0: the first legal action
    cand = top_candidates(torch.tensor([[0.0, 3.0, float("-inf"), 2.0], [5.0] + [float("-inf")] * 3]), 3)
    assert cand.tolist() == [[1, 3, 0], [0, -1, -1]]


def test_the_all_action_surrogate_moves_mass_to_the_candidate_that_kept_more_points():
    torch.manual_seed(0)
    logits = torch.randn(3, 6, requires_grad=True)
    mask = torch.tensor([[1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 0, 0], [0, 1, 1, 1, 0, 0]]).bool()
    value = torch.tensor([[0.0, -0.8, 0, 0, 0, 0], [0.2, 0, 0, 0, 0, 0], [0.0] * 6])  # row 2: a tie
    prior = logits.detach().masked_fill(~mask, float("-inf")).softmax(-1)
    loss, metrics = branch_surrogate(logits, value, mask, prior, 0.1)
    loss.backward()
    g = logits.grad
    assert g[0, 1] > 0 and g[0, 0] < 0 and g[0, 2] < 0  # descent lowers the deal-in, raises the others
    assert g[1, 0] < 0 < g[1, 1]
    assert (g[2] == 0).all() and (g[:, 3:][:2] == 0).all()  # ties and non-candidates: no gradient
    assert metrics["branch/tie_fraction"] == pytest.approx(1 / 3)
    # past the clip the surrogate stops pushing: a candidate already far up gets no more gradient
    moved = logits.detach().clone()
    moved[1, 0] += 3.0
    moved.requires_grad_(True)
    loss, metrics = branch_surrogate(moved, value, mask, prior, 0.1)
    loss.backward()
    assert moved.grad[1].abs().sum() == 0 and metrics["branch/clip_fraction"] > 0


def _riichi_declared(obs):
    """Opponents with a riichi declaration tile (seat plane 8 of docs/mahjong_encoding.md): a
    plane the riichi filter does not read."""
    return torch.stack([obs[:, 8 + 14 * i + 8].sum(-1) > 0 for i in (1, 2, 3)], -1).any(-1)


@pytest.mark.parametrize("option", ["kinds", "under_riichi"])
def test_a_branch_filter_branches_exactly_the_decisions_it_names(option):
    """env.branch.kinds=[riichi, call]: every branched decision offers a riichi or a call;
    env.branch.under_riichi: every one is taken while an opponent has declared riichi; with prob 1
    every such decision (two or more legal actions) is branched."""
    from meeple_mahjong.specs import rows_offering

    extra = {"kinds": ["riichi", "call"]} if option == "kinds" else {"under_riichi": True}
    env = MahjongEnv(16, branch={"prob": 1.0, "candidates": 3, "tables": 48, **extra})
    env.set_branch_policy(lowest_legal)
    env.set_seed(5)
    td = env.reset()
    branched = 0
    for _ in range(150):
        mask, bm = td["action_mask"], td["branch_mask"]
        named = rows_offering(mask, ("riichi", "call")) if option == "kinds" else _riichi_declared(td["observation"])
        expected = named & (mask.sum(-1) >= 2)
        assert (bm.any(-1) == expected).all()
        branched += int(expected.sum())
        td["action"] = torch.where(mask, -torch.arange(NA, dtype=torch.float32), float("-inf")).argmax(-1)
        stepped = env.step(td)
        if stepped["next", "done"].any():
            break
        td = step_mdp(stepped)
    assert branched >= 20, branched  # the walls offered some


def test_bad_branch_options_fail_in_one_line():
    with pytest.raises(ConfigError, match=r"env\.branch\.kinds=\['dama'\]; accepted: .*kinds null or a non-empty list"):
        BranchOptions.parse({"kinds": ["dama"]})
    assert BranchOptions.parse({"kinds": ["riichi", "call"]}).kinds == ("riichi", "call")
    with pytest.raises(ConfigError, match="under_riichi true/false"):
        BranchOptions.parse({"under_riichi": "yes"})
    with pytest.raises(ConfigError, match="unknown keys"):
        BranchOptions.parse({"probability": 0.1})
    with pytest.raises(ConfigError, match=r"accepted: a mapping with prob \(0, 1\]"):
        BranchOptions.parse({"prob": 0.0})
    with pytest.raises(ConfigError, match="candidates >= 2"):
        BranchOptions.parse({"candidates": 1})
    with pytest.raises(ConfigError, match=r"continuation one of \['sample', 'greedy'\]"):
        BranchOptions.parse({"continuation": "argmax"})
    with pytest.raises(ConfigError, match="branches are played with bots only"):
        MahjongEnv(4, branch={"prob": 0.5}, opponents="net", opponent_policies={"net": lowest_legal})
    env = MahjongEnv(4, branch={"prob": 1.0})
    with pytest.raises(RuntimeError, match="no policy set"):
        env.reset()
    with pytest.raises(ConfigError, match="env without branches"):
        MahjongEnv(4).set_branch_policy(lowest_legal)
    with pytest.raises(ConfigError, match="needs env.branch"):
        BranchPPOModule.prepare_env(None, MahjongEnv(4))  # type: ignore[arg-type]


def test_phase1_branch_trains_from_the_clone_on_branched_values(mahjong_runs, tiny_train, tmp_path):
    source = mahjong_runs["phase2"]  # its gates/phase1.pt is the clone
    tiny_train(tmp_path, "+experiment=phase1_branch", f"pipeline.source={source}", "pipeline.stages.rl.env.branch.prob=1.0")
    (run,) = (tmp_path / "outputs" / "runs").iterdir()
    gate = load_gate(run / "gates" / "branch.pt")
    clone = load_gate(source / "gates" / "phase1.pt")["model_state_dict"]
    state = gate["model_state_dict"]
    (stem,) = [k for k in state if k.startswith("actor.") and k.endswith("stem.0.weight")]
    assert not (state[stem] == clone[stem]).all()  # the branches' term moved the cloned body
    metrics = gate["metrics"]
    assert metrics["branch/rows"] > 0.5 and "loss/branch" in metrics and "eval/avg_rank" in metrics
    latest = load_verified(run / "phase1" / "checkpoints" / "latest.pt")
    assert latest["config"]["phase"]["module"]["surrogate_coef"] == 0.0
    assert latest["config"]["env"]["branch"]["candidates"] == 4


def _branched_batch(actor, tables=8, steps=10):
    """Decisions of ``actor`` (sampled) with every eligible decision branched, and some candidate
    ending its hand otherwise than the rest."""
    from meeple_mahjong.branch_noise import branched_decisions

    batch = branched_decisions(actor, {"candidates": 4, "tables": 64}, tables=tables, steps=steps, seed=11)
    return batch[batch["branch_value"].abs().amax(-1) > 0]


@pytest.mark.parametrize("broken", [False, True])
def test_the_branch_term_teaches_a_network_its_best_candidates(broken):
    """The learning check of the branch machinery: the all-action surrogate on values the env
    branched, through the real network, moves its mass onto each decision's best candidate; the
    same update with the logits cut from the network (a gradient that cannot reach the weights)
    does not."""
    from meeple_mahjong.net import build_mahjong_actor_critic

    torch.manual_seed(0)
    env = MahjongEnv(2)
    actor, _ = build_mahjong_actor_critic(env.observation_spec, env.action_spec, blocks=1, channels=16,
                                          groups=4, hidden=32, tile_head=True)  # fmt: skip
    batch = _branched_batch(actor)
    assert len(batch) >= 25
    opt = torch.optim.Adam(actor.parameters(), lr=3e-3)

    def best_mass():
        with torch.no_grad():
            return float(branch_surrogate(actor.get_dist(batch).logits, batch["branch_value"], batch["branch_mask"],
                                          batch["branch_prior"], 0.2)[1]["branch/best_mass"])  # fmt: skip

    start = best_mass()
    for _ in range(100):
        logits = actor.get_dist(batch).logits
        if broken:
            logits = logits.detach().requires_grad_(True)
        prior = logits.detach().masked_fill(~batch["branch_mask"], float("-inf")).softmax(-1)  # on-policy each step
        loss, _ = branch_surrogate(logits, batch["branch_value"], batch["branch_mask"], prior, 0.2)
        opt.zero_grad()
        loss.backward()
        opt.step()
    end = best_mass()
    if broken:
        assert end == pytest.approx(start, abs=1e-6)
    else:
        assert end > start + 0.15, (start, end)
