"""Lookahead planes (docs/mahjong_encoding.md): recomputed with the `xiangting` package from the
public planes of seeded rule-bot games, tied to the rule bot's own discards, suit-symmetric,
and carried into the network through a stem that starts at zero."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import xiangting

import meeple_mahjong as mj
from meeple_native import mahjong as _mj

HAND, VISIBLE, RIICHI_FLAG = 0, 73, 8 + 11  # public planes; riichi flag of seat r: 8 + 14 r + 11
SHANTEN, KEEPS_BEST, UKEIRE, UKEIRE_REL, ADVANCING = range(5)


def replacement(counts: np.ndarray) -> int:
    return xiangting.calculate_replacement_number(list(map(int, counts)), xiangting.PlayerCount.FOUR)


def expected_planes(obs: np.ndarray) -> np.ndarray:
    """The planes as the docs define them, from the public planes, with xiangting's shanten."""
    counts = (obs[HAND : HAND + 4] > 0.5).sum(0)
    unseen = 4 - np.rint(obs[VISIBLE] * 4).astype(int)
    out = np.zeros((mj.LOOKAHEAD_PLANES, 34), np.float32)
    n = int(counts.sum())

    def advancing(hand: np.ndarray) -> tuple[int, np.ndarray]:
        sh, per_kind = replacement(hand), np.zeros(34, np.float32)
        for k in range(34):
            if unseen[k] and hand[k] < 4:
                hand[k] += 1
                if replacement(hand) < sh:
                    per_kind[k] = unseen[k] / 4
                hand[k] -= 1
        return int(round(per_kind.sum() * 4)), per_kind

    if n % 3 == 1:
        out[ADVANCING] = advancing(counts.copy())[1]
        return out
    held = np.flatnonzero(counts)
    sh, uke = {}, {}
    for k in held:
        counts[k] -= 1
        sh[k] = replacement(counts) - 1
        uke[k] = advancing(counts.copy())[0]
        counts[k] += 1
    best = min(sh.values())
    best_uke = max(uke[k] for k in held if sh[k] == best)
    for k in held:
        out[SHANTEN, k] = (min(sh[k], 6) + 1) / 7
        out[KEEPS_BEST, k] = sh[k] == best
        out[UKEIRE, k] = uke[k] / 40
        if sh[k] == best and best_uke:
            out[UKEIRE_REL, k] = uke[k] / best_uke
    return out


def bot_decisions(games: int, seed: int):
    """(public planes, the rule bot's action index) at every decision of rule-bot games."""
    g = mj.Game()
    for index in range(games):
        g.reset(seed, index)
        while g.pending():
            seat = g.pending()[0]
            action = _mj.bot_action(g, seat, "rule", 0)
            yield mj.encode_public(g, seat), _mj.action_index(action, True)
            g.step(seat, action)


def test_planes_match_xiangting_on_bot_games():
    seen = {SHANTEN: 0, ADVANCING: 0}
    for i, (obs, _) in enumerate(bot_decisions(2, 11)):
        if i % 7:  # every 7th decision keeps xiangting's Python loop to a second
            continue
        ours = mj.encode_lookahead(obs)
        np.testing.assert_allclose(ours, expected_planes(obs), atol=1e-6)
        seen[SHANTEN] += ours[SHANTEN].any()
        seen[ADVANCING] += ours[ADVANCING].any()
    assert seen[SHANTEN] > 100 and seen[ADVANCING] > 30  # both kinds of hand were checked


def test_the_rule_bot_discards_a_kind_the_planes_rank_first_when_nobody_is_in_riichi():
    """Away from riichi the bot discards by (shanten, ukeire, keep value): its kind keeps the best
    shanten and has the most live advancing tiles among those (plane 3 = 1) on ~99.9% of discards."""
    red = {34: 4, 35: 13, 36: 22}
    top, total = 0, 0
    for obs, index in bot_decisions(6, 3):
        kind = index if index < 34 else red.get(index)
        riichi = any(obs[RIICHI_FLAG + 14 * r, 0] for r in range(4))
        if kind is None or riichi or obs[HAND : HAND + 4].sum() % 3 != 2:
            continue
        total += 1
        top += mj.encode_lookahead(obs)[UKEIRE_REL, kind] == 1.0
    assert total > 1500
    assert top / total > 0.99, (top, total)


def test_planes_follow_a_suit_permutation_and_batches():
    from meeple_mahjong.augment import SUIT_PERMUTATIONS, permute_planes

    obs = np.stack([o for i, (o, _) in enumerate(bot_decisions(1, 5)) if i % 25 == 0])
    planes = mj.encode_lookahead(obs)
    assert planes.shape == (len(obs), mj.LOOKAHEAD_PLANES, 34) and planes.any()
    for perm in SUIT_PERMUTATIONS:
        np.testing.assert_array_equal(mj.encode_lookahead(permute_planes(obs, perm)), permute_planes(planes, perm))
    one = torch.from_numpy(obs[3].copy())
    np.testing.assert_array_equal(mj.encode_lookahead(one), planes[3])  # a torch tensor, one observation
    assert not mj.encode_lookahead(np.zeros((84, 34), np.float32)).any()  # no hand: no planes
    many = np.concatenate([obs] * 8)  # enough rows for 3 threads to share
    np.testing.assert_array_equal(mj.encode_lookahead(many, 3), np.concatenate([planes] * 8))


def test_bad_inputs_say_what_is_accepted():
    with pytest.raises(ValueError, match=r"shape \(\.\.\., 84, 34\); got shape \(205, 34\)"):
        mj.encode_lookahead(np.zeros((205, 34), np.float32))
    with pytest.raises(ValueError, match="threads must be >= 1, got 0"):
        mj.encode_lookahead(np.zeros((84, 34), np.float32), 0)
    with pytest.raises(TypeError, match=r"a CPU array \(numpy or torch\) of public planes.*got str"):
        mj.encode_lookahead("planes")
    obs = next(o for o, _ in bot_decisions(1, 2))
    wide = np.zeros((84, 68), np.float32)
    wide[:, ::2] = obs
    for other in (obs.astype(np.float64), wide[:, ::2]):  # read-only input: converted, same planes
        np.testing.assert_array_equal(mj.encode_lookahead(other), mj.encode_lookahead(obs))


def test_a_lookahead_network_starts_as_the_network_without_it_and_learns_through_it():
    from meeple_mahjong.net import build_mahjong_actor_critic
    from meeple_mahjong.specs import action_spec, observation_spec

    sizes = {"blocks": 1, "channels": 16, "groups": 4, "neck": 4, "hidden": 32}
    torch.manual_seed(0)
    plain, _ = build_mahjong_actor_critic(observation_spec(1, oracle=False), action_spec(1), **sizes)
    looking, _ = build_mahjong_actor_critic(observation_spec(1, oracle=False), action_spec(1), lookahead=True, **sizes)
    missing, unexpected = looking.load_state_dict(plain.state_dict(), strict=False)
    assert sorted(missing) == ["module.0.module.lookahead_stem.weight", "module.1.module.addend.conv.bias",
                               "module.1.module.addend.conv.weight"] and not unexpected, missing
    decisions = [(o, i) for o, i in bot_decisions(1, 9) if o[HAND : HAND + 4].sum() % 3 == 2][:64]
    obs = torch.from_numpy(np.stack([o for o, _ in decisions]))
    mask = torch.zeros(len(obs), mj.NUM_ACTIONS, dtype=torch.bool)
    mask[:, :34] = obs[:, HAND] > 0
    from tensordict import TensorDict

    td = TensorDict({"observation": obs, "action_mask": mask}, batch_size=[len(obs)])
    before = plain.get_dist(td.clone()).logits
    torch.testing.assert_close(looking.get_dist(td.clone()).logits, before)
    loss = looking.get_dist(td.clone()).logits.logsumexp(-1).mean()
    loss.backward()
    for name, weight in looking.named_parameters():  # the gradient reaches the new weights
        if name in missing:
            assert weight.grad is not None and weight.grad.abs().sum() > 0, name


def test_an_exported_lookahead_network_takes_the_planes_from_its_caller(tmp_path):
    """The C++ planes cannot be traced: the ONNX graph takes them as an input named in the sidecar,
    and onnxruntime fed the planes a caller computes matches eager torch (which computes its own)
    on the public planes of real games; fed other planes, it does not (the input is read)."""
    from meeple.export import ExportedPolicy
    from meeple.export.onnx import feeds, session, write_policy
    from meeple.export.policy import LoadedPolicy, Samples, TensorDictHeads
    from meeple_mahjong.net import build_mahjong_actor_critic
    from meeple_mahjong.specs import action_spec, observation_spec

    actor, critic = build_mahjong_actor_critic(observation_spec(1, oracle=False), action_spec(1), lookahead=True,
                                               tile_head=True, blocks=1, channels=8, groups=4, neck=4, hidden=16)
    torch.manual_seed(0)
    for name, weight in actor.named_parameters():
        if "lookahead" in name or "addend" in name:  # a trained lookahead head (they start at zero)
            torch.nn.init.normal_(weight)
    policy = ExportedPolicy(TensorDictHeads(actor, critic), has_mask=False).eval()
    assert policy.input_names() == ["observation", "lookahead_planes"]
    loaded = LoadedPolicy(policy, tmp_path / "x.pt", "meeple_mahjong.net.build_mahjong_actor_critic", "ppo", {},
                          (84, 34), torch.float32, 155)
    obs = torch.from_numpy(np.stack([o for o, _ in bot_decisions(1, 7)][:64]))
    out, parity = write_policy(loaded, tmp_path / "policy.onnx", samples=Samples(obs, None))
    assert parity.ok(1e-4) and parity.batches == [1, 64]
    sidecar = __import__("json").loads((tmp_path / "policy.onnx.json").read_text())
    assert sidecar["inputs"]["lookahead_planes"]["shape"] == ["batch", 5, 34]
    assert "encode_lookahead" in sidecar["inputs"]["lookahead_planes"]["computed_by"]

    sess = session(out, threads=1)
    given = feeds(obs, None, policy.caller_inputs)
    np.testing.assert_array_equal(given["lookahead_planes"], _mj.encode_lookahead(obs.numpy()))
    with torch.no_grad():
        eager_logits, _ = policy(obs)
    onnx_logits, _ = sess.run(None, given)
    assert np.abs(onnx_logits - eager_logits.numpy()).max() <= 1e-4
    wrong, _ = sess.run(None, {**given, "lookahead_planes": np.zeros_like(given["lookahead_planes"])})
    assert np.abs(wrong - eager_logits.numpy()).max() > 1e-2


def test_a_lookahead_gate_carries_into_a_stage_that_adds_the_tile_head():
    """phase1_rl adds the tile head to a phase-1 clone trained with the planes: the clone's one
    addend (keys addend.*) lands in its part of the stage's two (addend.parts.1.*), the tile
    head starts at zero, and the policy is the clone's."""
    from tensordict import TensorDict

    from meeple.pipeline.transition import carry_weights
    from meeple_mahjong.net import build_mahjong_actor_critic
    from meeple_mahjong.specs import action_spec, observation_spec

    sizes = {"blocks": 1, "channels": 16, "groups": 4, "neck": 4, "hidden": 32}
    torch.manual_seed(0)
    gate = torch.nn.ModuleDict(dict(zip(("actor", "critic"), build_mahjong_actor_critic(
        observation_spec(1, oracle=False), action_spec(1), lookahead=True, **sizes))))
    torch.nn.init.normal_(gate.actor.module[1].module.addend.conv.weight)  # a trained lookahead head
    stage = torch.nn.ModuleDict(dict(zip(("actor", "critic"), build_mahjong_actor_critic(
        observation_spec(1, oracle=False), action_spec(1), lookahead=True, tile_head=True, **sizes))))
    with pytest.raises(Exception, match="does not match this stage's model"):  # without keep_new
        carry_weights(stage, gate.state_dict(), ["actor", "critic"], Path("gate.pt"))
    carry_weights(stage, gate.state_dict(), ["actor", "critic"], Path("gate.pt"), keep_new=True)
    parts = stage.actor.module[1].module.addend.parts
    torch.testing.assert_close(parts[1].conv.weight, gate.actor.module[1].module.addend.conv.weight)
    assert parts[0].conv.weight.abs().sum() == 0
    obs = torch.from_numpy(np.stack([o for o, _ in bot_decisions(1, 9)][:32]))
    td = TensorDict({"observation": obs, "action_mask": torch.ones(len(obs), mj.NUM_ACTIONS, dtype=torch.bool)},
                    batch_size=[len(obs)])
    torch.testing.assert_close(stage.actor.get_dist(td.clone()).logits, gate.actor.get_dist(td.clone()).logits)
