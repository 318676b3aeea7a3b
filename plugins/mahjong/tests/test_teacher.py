"""The oracle teacher's safety term (meeple_mahjong.teacher): the discards it calls dealing are the
ones the engine lets an opponent ron, and the term steers a policy off them."""

import numpy as np
import pytest
import torch
from tensordict import TensorDict

import meeple_mahjong as mj
from meeple.errors import ConfigError
from meeple_mahjong.batch_env import MahjongEnv
from meeple_mahjong.net import build_mahjong_actor_critic
from meeple_mahjong.safety import BLOCK_MARGIN, dealing_actions, discard_kinds
from meeple_mahjong.teacher import OracleTeacherModule
from meeple_native import mahjong as _mj

TINY = dict(blocks=1, channels=8, groups=4, neck=4, hidden=16)


def _replay(history, seed, index):
    g = mj.Game()
    g.reset(seed, index)
    for seat, action in history:
        g.step(seat, action)
    return g


def _rons_after(history, seed, index, seat, action):
    """Whether any other seat may ron right after ``seat`` plays ``action`` (the engine says)."""
    g = _replay(history, seed, index)
    g.step(seat, action)
    if g.is_done():
        return False
    return any(a.type == "ron" for s in g.pending() if s != seat for a in g.legal_actions(s))


def test_dealing_discards_are_exactly_the_ones_an_opponent_may_ron_on_or_lack_a_yaku():
    """Over rule-bot games: every discard after which the engine offers an opponent ron is
    marked dealing (none missed), and most marked discards are ron-able (the rest: no yaku)."""
    kinds = discard_kinds()
    checked = marked = ronnable_marked = 0
    for index in range(3):
        g = mj.Game()
        g.reset(11, index)
        history = []
        streams = [_mj.BotStream(_mj.seat_stream_seed(5, s)) for s in range(4)]
        while not g.is_done() and checked < 400:
            seat = g.pending()[0]
            mask = torch.as_tensor(mj.legal_mask(g, seat)).bool()
            if seat == 0 and mask[kinds >= 0].any() and len(g.pending()) == 1:
                oracle = torch.as_tensor(mj.encode_oracle(g, seat))
                dealing = dealing_actions(oracle, mask, kinds)
                for a in np.flatnonzero(mask[:37].numpy()):  # plain discards
                    action = mj.action_from_index(g, seat, int(a))
                    rons = _rons_after(history, 11, index, seat, action)
                    checked += 1
                    assert not (rons and not dealing[a]), (index, len(history), a)
                    marked += bool(dealing[a])
                    ronnable_marked += bool(dealing[a]) and rons
            action = streams[seat].act(g, seat, "rule")
            history.append((seat, action))
            g.step(seat, action)
    assert checked >= 100 and marked >= 5, (checked, marked)
    assert ronnable_marked >= marked / 2, (ronnable_marked, marked)


def _networks(safety: bool = False, oracle_planes: int = mj.ORACLE_PLANES):
    env = MahjongEnv(1, oracle=True)
    torch.manual_seed(0)
    networks = build_mahjong_actor_critic(env.observation_spec, env.action_spec, **TINY,
                                          oracle_planes=oracle_planes, oracle_safety=safety)  # fmt: skip
    env.close()
    if oracle_planes:
        # The oracle convolution starts at zero; with this file's all-zero public planes the stem's
        # ReLU would then pass no gradient at all, so start it as a teacher that reads them a little.
        torch.nn.init.normal_(networks[0].module[0].module.oracle_stem.weight, std=0.05)
    return networks


def _module(coef: float, oracle_planes: int = mj.ORACLE_PLANES):
    actor, critic = _networks(oracle_planes=oracle_planes)
    return OracleTeacherModule(actor, critic, optimizer=torch.optim.Adam, anneal_lr=False,
                               max_grad_norm=None, gamma=1.0, gae_lambda=0.95, clip_epsilon=0.1,
                               entropy_coef=0.0, critic_coef=0.5, normalize_advantage=False,
                               safety_coef=coef)  # fmt: skip


def _batch(n: int = 64) -> TensorDict:
    """Discard decisions where kinds 0-2 are legal and opponent 1 waits on kind 0."""
    oracle = torch.zeros(n, mj.ORACLE_PLANES, 34)
    oracle[:, 6, 0] = 1.0  # opponent 1's winning kinds: 1m
    oracle[n // 2 :, 7, :] = 1.0  # ... but in half the rows it is furiten: nothing deals in
    mask = torch.zeros(n, mj.NUM_ACTIONS, dtype=torch.bool)
    mask[:, :3] = True
    return TensorDict({"observation": torch.zeros(n, 84, 34), "oracle": oracle, "action_mask": mask,
                       "action": torch.zeros(n, dtype=torch.int64)}, [n])  # fmt: skip


def _train_on_the_term(module, batch, steps: int = 60) -> list[dict[str, float]]:
    """``steps`` Adam steps on the safety term alone; each step's metrics."""
    opt = torch.optim.Adam(module.actor.parameters(), lr=1e-2)
    history = []
    for _ in range(steps):
        metrics = {}
        loss = module.extra_terms(batch, TensorDict(), lambda: module.actor.get_dist(batch), metrics)
        opt.zero_grad()
        loss.backward()
        opt.step()
        history.append({k: float(v) for k, v in metrics.items()})
    return history


def test_the_safety_term_moves_the_mass_off_dealing_discards():
    module = _module(1.0)
    history = _train_on_the_term(module, _batch())
    masses = [m["oracle/dealing_mass"] for m in history]
    # only the rows where opponent 1 is not furiten offer a choice, and the rollout's action
    # (kind 0) dealt in in all of them
    assert all(m["oracle/choice_fraction"] == 0.5 and m["oracle/dealing_rate"] == 1.0 for m in history)
    assert masses[0] == pytest.approx(1 / 3, abs=0.05) and masses[-1] < 0.05, masses
    # the oracle stem's weights are what moved it: the public planes are all zero here
    assert module.oracle_stem().grad.abs().sum() > 0


def test_a_public_policy_is_measured_and_taught_by_the_oracle_labels():
    """model.oracle_planes=0: the actor reads public planes only; the term still moves its mass
    off the kind that deals in (here always kind 0), through the public stem."""
    module = _module(1.0, oracle_planes=0)
    assert module.oracle_stem() is None and "oracle_stem" not in module.diagnostic_groups()
    assert "oracle" not in module.actor.in_keys
    batch = _batch()
    batch["observation"] = torch.rand(batch["observation"].shape, generator=torch.Generator().manual_seed(1))
    masses = [m["oracle/dealing_mass"] for m in _train_on_the_term(module, batch)]
    assert masses[0] == pytest.approx(1 / 3, abs=0.05) and masses[-1] < 0.05, masses


def test_without_the_coefficient_it_only_measures():
    module = _module(0.0)
    batch = _batch()
    metrics = {}
    assert module.extra_terms(batch, TensorDict(), lambda: module.actor.get_dist(batch), metrics) == 0.0
    assert "loss/oracle_safety" not in metrics and "oracle/dealing_mass" in metrics
    with pytest.raises(ConfigError, match="safety_coef"):
        _module(-1.0)


def test_the_safety_mask_blocks_avoidable_dealing_actions_and_nothing_else():
    plain, _ = _networks()
    safe, _ = _networks(safety=True)
    safe.load_state_dict(plain.state_dict())  # strict: the mask has no parameters
    batch = _batch()
    batch["observation"] = torch.rand(len(batch), 84, 34)
    p = plain.get_dist(batch.clone()).logits.clamp_min(-1e9)
    q = safe.get_dist(batch.clone()).logits.clamp_min(-1e9)
    half = len(batch) // 2
    # not furiten: the dealing 1m (and its riichi form, illegal here) is blocked below the others
    assert (q[:half, 0] <= q[:half, 1:3].min(-1).values - BLOCK_MARGIN + 1e-4).all()
    torch.testing.assert_close(q[:half, 1] - q[:half, 2], p[:half, 1] - p[:half, 2])  # log-probs: differences
    assert (q[:half, :3].argmax(-1) != 0).all()
    # furiten rows: untouched
    torch.testing.assert_close(q[half:], p[half:])
    # a student that cannot see the oracle pays a finite KL to it
    student = torch.log_softmax(torch.zeros(half, 3), -1)
    teacher = torch.log_softmax(q[:half, :3], -1)
    kl = (student.exp() * (student - teacher)).sum(-1)
    assert torch.isfinite(kl).all() and (kl > 1).all()
    # when every legal action deals in, nothing is blocked
    batch["action_mask"][:, 1:3] = False
    torch.testing.assert_close(safe.get_dist(batch.clone()).logits, plain.get_dist(batch.clone()).logits)


def test_the_safety_mask_needs_the_oracle_planes():
    env = MahjongEnv(1)
    with pytest.raises(ConfigError, match="oracle_safety"):
        build_mahjong_actor_critic(env.observation_spec, env.action_spec, **TINY, oracle_safety=True)
    env.close()


def test_the_safe_policy_never_deals_in_when_it_need_not():
    """At every decision of a full game the safe wrapper's action is not dealing unless every
    legal action is; the wrapped policy is asked with the dealing actions masked out."""
    from meeple_mahjong import duplicate as dup
    from meeple_mahjong.policy import PolicyTable
    from meeple_mahjong.safety import safe_policy

    kinds = discard_kinds()
    seen = {"decisions": 0, "avoided": 0}

    def first_legal(obs, mask):  # plain discards come first: often a dealing tile
        return mask.to(torch.int8).argmax(-1)

    fn = safe_policy(first_legal)

    def checked(obs, mask, oracle):
        actions = fn(obs, mask, oracle)
        dealing = dealing_actions(oracle, mask.bool(), kinds)
        chose = dealing.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
        all_dealing = ~(mask.bool() & ~dealing).any(-1)
        assert not (chose & ~all_dealing).any()
        seen["decisions"] += len(obs)
        seen["avoided"] += int((dealing.gather(-1, first_legal(obs, mask).unsqueeze(-1)).squeeze(-1)
                                & ~all_dealing).sum())
        return actions

    checked.oracle = True
    table = PolicyTable({"policy": checked}, threads=1)
    dup.run_duplicate(table, "policy", "rule", 2, seed=3)
    assert seen["decisions"] > 100 and seen["avoided"] > 0, seen


def test_the_start_copy_can_play_without_the_rule():
    """duplicate opponent=start with start_rules=false: the network alone (the phase-1 student)."""
    from meeple.nets.actor_critic import without_logits_transforms
    from meeple_mahjong.evaluation import DuplicateEvaluation

    plain, _ = _networks()
    safe, _ = _networks(safety=True)
    safe.load_state_dict(plain.state_dict())
    batch = _batch()
    assert not torch.allclose(safe.get_dist(batch.clone()).logits, plain.get_dist(batch.clone()).logits)
    assert without_logits_transforms(safe) == 1
    torch.testing.assert_close(safe.get_dist(batch.clone()).logits, plain.get_dist(batch.clone()).logits)
    with pytest.raises(ValueError, match="start_rules"):
        DuplicateEvaluation(games=1, opponent="rule", start_rules=False)


def test_oracle_dropout_plays_a_share_of_decisions_blind_and_keeps_the_labels():
    """env.oracle_keep=0.5: about half the learner's decisions see all-zero oracle planes (the
    same draws for the same seed), `oracle_truth` keeps the opponents' planes of every decision,
    and the teacher module labels dealing discards from it, also measuring the blind rows."""

    def run(seed):
        env = MahjongEnv(8, oracle=True, oracle_keep=0.5)
        env.set_seed(seed)
        td, steps = env.reset(), []
        for _ in range(30):
            steps.append(td.select("oracle", "oracle_shown", "oracle_truth").clone())
            td = env.step(env.rand_action(td))["next"]
        env.close()
        return torch.stack(steps)

    steps = run(3)
    shown = steps["oracle_shown"].squeeze(-1)
    oracle, truth = steps["oracle"], steps["oracle_truth"]
    assert 0.3 < shown.float().mean() < 0.7, shown.float().mean()
    assert (oracle[~shown] == 0).all()
    assert torch.equal(oracle[shown][:, : truth.shape[-2]], truth[shown])
    assert truth[~shown].abs().sum() > 0  # the blind decisions' labels are still there
    assert torch.equal(run(3)["oracle_shown"], steps["oracle_shown"])
    assert not torch.equal(run(4)["oracle_shown"], steps["oracle_shown"])

    # the module: labels from the truth, the dealing mass also on the blind rows alone
    module = _module(0.0)
    batch = _batch()
    n = len(batch)
    batch["oracle_truth"] = batch["oracle"][:, :27].clone()
    batch["oracle_shown"] = (torch.arange(n) % 2 == 0).unsqueeze(-1)
    batch["oracle"] = batch["oracle"] * batch["oracle_shown"].unsqueeze(-1)
    metrics = {}
    module.extra_terms(batch, TensorDict(), lambda: module.actor.get_dist(batch), metrics)
    assert metrics["oracle/choice_fraction"] == 0.5  # as without dropout: the truth labels them
    assert 0 < metrics["oracle/dealing_mass_blind"] < 1
    assert metrics["oracle/dealing_mass_blind"] != metrics["oracle/dealing_mass"]  # the blind rows' own


@pytest.mark.parametrize("options", [dict(oracle=True, oracle_keep=1.5), dict(oracle_keep=0.5),
                                     dict(oracle=True, oracle_keep="half"), dict(oracle=True, oracle_keep=[0.5]),
                                     dict(oracle=True, oracle_keep=[1.0, -0.1]), dict(oracle_keep=[1.0, 0.0])])
def test_oracle_dropout_rejects_bad_shares(options):
    with pytest.raises(ConfigError, match="env.oracle_keep"):
        MahjongEnv(1, **options)
    if options == dict(oracle_keep=0.5):  # nor in a league
        from meeple_mahjong.env import backend

        with pytest.raises(ConfigError, match="env.oracle_keep with env.league"):
            backend.make_env({"league": True, "oracle": True, "oracle_keep": 0.5}, num_envs=1)


def test_a_scheduled_oracle_dropout_is_steered_per_rollout_by_the_teacher(tmp_path, monkeypatch):
    """env.oracle_keep=[1.0, 0.0] over three rollouts: the teacher module sets the share to 1, 0.5
    and 0 before the rollouts (through the real phase), and the env draws with it."""
    from meeple.cli.train import train
    from meeple.config.compose import compose_config

    monkeypatch.chdir(tmp_path)
    steered, shown = [], []
    set_keep, drop = MahjongEnv.set_oracle_keep, MahjongEnv._drop_oracle
    monkeypatch.setattr(MahjongEnv, "set_oracle_keep", lambda env, keep: (steered.append(keep), set_keep(env, keep)))
    monkeypatch.setattr(MahjongEnv, "_drop_oracle", lambda env, td: (drop(env, td), shown.append(td["oracle_shown"])))
    metrics = train(compose_config([
        "+experiment=mahjong_drill", "env=mahjong", "env.oracle=true", "env.oracle_keep=[1.0,0.0]", "env.num_envs=8",
        "phase.rollout_steps=8", "phase.total_frames=192", "phase.minibatch_size=32", "phase.callbacks.eval=null",
        "tracking=none", "checkpoint=none", "callbacks.progress=null", "callbacks.curves=null", "hardware.torch_threads=1",
    ]))
    assert steered == [1.0, 0.5, 0.0, 0.0]  # before rollouts 0, 1, 2 (and a 4th that never comes)
    assert len(shown) == 1 + 3 * 8  # the reset, then 8 steps a rollout
    assert all(s.all() for s in shown[:9]) and not any(s.any() for s in shown[-8:])
    assert 0.2 < torch.cat(shown[9:17]).float().mean() < 0.8
    # the last rollout's first decisions were drawn at the end of the one before (0.5), the rest at 0
    assert metrics["oracle/shown_fraction"] < 0.2


def test_a_scheduled_oracle_dropout_needs_a_learner_that_steers_it(monkeypatch):
    env = MahjongEnv(4, oracle=True, oracle_keep=[1.0, 0.0])
    with pytest.raises(ConfigError, match="a schedule needs a learner that steers it"):
        env.reset()
    with pytest.raises(ConfigError, match="set_oracle_keep"):
        MahjongEnv(4, oracle=True).set_oracle_keep(0.5)
    with pytest.raises(ConfigError, match="set_oracle_keep"):
        env.set_oracle_keep(1.5)
    import multiprocessing

    monkeypatch.setattr(multiprocessing, "parent_process", lambda: object())  # as in a collector worker
    with pytest.raises(ConfigError, match="env.num_workers=1"):
        _module(0.0).prepare_env(env)
