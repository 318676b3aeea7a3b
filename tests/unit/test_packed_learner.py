"""PackedRolloutBuffer, the packed CNN, the decoupled PPO loss and the sync-free rollout loop."""

import pytest
import torch

from meeple.envs.goal_grid import make_goal_grid
from meeple.envs.packed import unpack
from meeple.nets.packed_cnn import CellPatches, PackedCNN
from meeple.phases.packed_ppo.actor import collect_rollout
from meeple.phases.packed_ppo.buffer import PackedRolloutBuffer
from meeple.phases.packed_ppo.module import decoupled_clip_loss
from meeple.phases.packed_ppo.sync_guard import HostSyncError, no_host_sync


def test_buffer_shapes_and_bytes():
    buffer = PackedRolloutBuffer(steps=5, num_envs=3, frames_per_obs=2)
    assert buffer.obs.shape == (6, 3, 2, 72, 20) and buffer.obs.dtype == torch.uint8
    for key in ("actions", "rewards", "dones", "values", "logprobs"):
        assert getattr(buffer, key).shape == (5, 3)
    assert buffer.obs_offset(2) == 2 * 3 * 2 * 1440
    assert buffer.obs.view(-1)[buffer.obs_offset(2)] is not None
    with pytest.raises(ValueError, match="num_envs=0"):
        PackedRolloutBuffer(5, 0, 2)


def reference_gae(rewards, values, dones, bootstrap, gamma, lam):
    """Textbook GAE in plain Python, one env at a time."""
    steps, n = rewards.shape
    adv = torch.zeros(steps, n, dtype=torch.float64)
    for e in range(n):
        running, next_value = 0.0, float(bootstrap[e])
        for t in reversed(range(steps)):
            nonterminal = 0.0 if dones[t, e] else 1.0
            delta = float(rewards[t, e]) + gamma * nonterminal * next_value - float(values[t, e])
            running = delta + gamma * lam * nonterminal * running
            adv[t, e] = running
            next_value = float(values[t, e])
    return adv


def test_gae_matches_the_textbook_recursion():
    gen = torch.Generator().manual_seed(0)
    buffer = PackedRolloutBuffer(steps=12, num_envs=4, frames_per_obs=1)
    buffer.rewards.copy_(torch.randn(12, 4, generator=gen))
    buffer.values.copy_(torch.randn(12, 4, generator=gen))
    buffer.dones.copy_(torch.rand(12, 4, generator=gen) < 0.2)
    buffer.bootstrap_value.copy_(torch.randn(4, generator=gen))
    buffer.compute_gae(0.97, 0.9)
    expected = reference_gae(
        buffer.rewards, buffer.values, buffer.dones, buffer.bootstrap_value, 0.97, 0.9
    )
    assert torch.allclose(buffer.advantages.double(), expected, atol=1e-5)
    assert torch.allclose(buffer.returns, buffer.advantages + buffer.values)


def test_minibatches_cover_every_sample_once_per_epoch():
    buffer = PackedRolloutBuffer(steps=4, num_envs=6, frames_per_obs=2)
    buffer.actions.copy_(torch.arange(24).view(4, 6))
    for t in range(4):  # tag each observation with its sample index
        buffer.obs[t, :, 0, 0, 0] = torch.arange(6, dtype=torch.uint8) + 6 * t
    batches = list(buffer.minibatches(8, epochs=2, generator=torch.Generator().manual_seed(0)))
    assert len(batches) == 6 and all(b["obs"].shape == (8, 2, 72, 20) for b in batches)
    for epoch in (batches[:3], batches[3:]):
        seen = torch.cat([b["actions"] for b in epoch])
        assert sorted(seen.tolist()) == list(range(24))
        for b in epoch:
            assert torch.equal(
                b["obs"][:, 0, 0, 0].long(), b["actions"]
            )  # obs and per-step values stay aligned
    with pytest.raises(ValueError, match="minibatch_size=25"):
        next(buffer.minibatches(25, 1, torch.Generator()))


def test_cnn_unpacks_packed_frames_with_the_lut():
    net = PackedCNN(frames_per_obs=2, num_actions=5)
    frames = torch.randint(
        0, 256, (3, 2, 72, 20), generator=torch.Generator().manual_seed(0), dtype=torch.uint8
    )
    assert torch.allclose(net.unpack(frames), unpack(frames).float() / 3)
    logits, value = net(frames)
    assert logits.shape == (3, 5) and value.shape == (3,)
    (logits.sum() + value.sum()).backward()
    assert all(p.grad is not None for p in net.parameters())
    with pytest.raises(ValueError, match="uint8"):
        net(frames.float())


def test_warp_and_torch_unpack_kernels_agree():
    pytest.importorskip("warp")
    from meeple.nets.packed_cnn import PackedUnpack

    frames = torch.randint(
        0, 256, (5, 2, 72, 20), generator=torch.Generator().manual_seed(4), dtype=torch.uint8
    )
    warp, eager = PackedUnpack("warp")(frames), PackedUnpack("torch")(frames)
    assert torch.equal(warp, eager) and warp.shape == (5, 2, 72, 80)
    assert torch.equal(PackedUnpack("warp")(frames[:, :1]), eager[:, :1])  # non-contiguous input
    import copy

    net = PackedCNN(2, 5)
    net(frames)  # builds the Warp unpacker; a deep copy (the async actor) must still work
    twin = copy.deepcopy(net)
    assert torch.equal(twin(frames)[0], net(frames)[0])
    with pytest.raises(ValueError, match="kernel='gl'"):
        PackedUnpack("gl")


def test_cell_patches_equal_a_strided_convolution():
    patches = CellPatches(2, 8)
    conv = torch.nn.Conv2d(2, 8, kernel_size=4, stride=4)
    with torch.no_grad():
        conv.weight.copy_(patches.linear.weight.view(8, 2, 4, 4))
        conv.bias.copy_(patches.linear.bias)
    x = torch.rand(3, 2, 72, 80)
    assert torch.allclose(patches(x), conv(x), atol=1e-5)


def test_decoupled_loss_is_ppo_clip_without_lag_and_reweights_under_lag():
    gen = torch.Generator().manual_seed(0)
    logp, mu, adv = (
        torch.randn(64, generator=gen),
        torch.randn(64, generator=gen),
        torch.randn(64, generator=gen),
    )
    loss, _, weight = decoupled_clip_loss(logp, mu, mu, adv, 0.2, 2.0)
    ratio = torch.exp(logp - mu)
    ppo = -torch.minimum(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean()
    assert torch.equal(loss, ppo) and weight.item() == 1.0
    prox = (
        mu + 0.5
    )  # the learner moved on: pi_prox / mu = e^0.5, truncated at 2 where it exceeds it
    lagged, _, weight = decoupled_clip_loss(logp, prox, mu, adv, 0.2, 1.5)
    assert weight.item() == pytest.approx(1.5)
    ratio = torch.exp(logp - prox)
    assert lagged.item() == pytest.approx(
        (-1.5 * torch.minimum(ratio * adv, ratio.clamp(0.8, 1.2) * adv)).mean().item()
    )


@pytest.mark.parametrize("renderer", ["warp", "torch"])
def test_rollout_loop_never_syncs_with_the_host(renderer):
    pytest.importorskip("warp") if renderer == "warp" else None
    env = make_goal_grid(8, renderer=renderer)
    env.reset(0)
    net = PackedCNN(2, 5)
    buffer = PackedRolloutBuffer(6, 8, 2)
    with no_host_sync():
        collect_rollout(env, net, buffer, torch.Generator().manual_seed(0))
    assert buffer.obs[1:].any() and set(buffer.actions.unique().tolist()) <= set(range(5))
    assert buffer.stats["episodes"].dim() == 0  # stats stay device tensors until reduced


def test_sync_guard_catches_host_reads():
    x = torch.ones(3)
    for read in (
        lambda: x.sum().item(),
        lambda: x.tolist(),
        lambda: x.cpu(),
        lambda: x.numpy(),
        lambda: bool(x.any()),
        lambda: float(x.sum()),
        lambda: int(x.sum()),
    ):
        with pytest.raises(HostSyncError), no_host_sync(cuda=False):
            read()
    assert x.sum().item() == 3.0  # restored on exit
