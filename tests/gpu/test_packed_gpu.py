"""Packed pipeline on CUDA: bit-identical renderers, no host syncs in the rollout loop, async streams.

Needs only torch, lightning and warp-lang (no TorchRL or MLflow): runs on a bare GPU machine.
"""

import pytest
import torch

from meeple.envs.goal_grid import make_goal_grid
from meeple.nets.packed_cnn import PackedCNN
from meeple.phases.packed_ppo.actor import collect_rollout
from meeple.phases.packed_ppo.buffer import PackedRolloutBuffer
from meeple.phases.packed_ppo.sync_guard import no_host_sync

pytestmark = pytest.mark.gpu
pytest.importorskip("warp")
CUDA = torch.device("cuda")


def play(renderer, device, n=512, steps=100):
    env = make_goal_grid(n, renderer=renderer, device=device)
    env.reset(7)
    buffer = PackedRolloutBuffer(steps, n, 2, device)
    buffer.actions.copy_(
        torch.randint(0, 5, (steps, n), generator=torch.Generator().manual_seed(3))
    )
    env.render_packed_into(buffer.obs, 0)
    for t in range(steps):
        env.step(buffer.actions, buffer.rewards, buffer.dones, t * n)
        env.render_packed_into(buffer.obs, buffer.obs_offset(t + 1))
    torch.cuda.synchronize()
    return buffer


def test_warp_and_torch_frames_are_bit_identical_on_cuda_and_equal_cpu():
    warp, torch_cuda, torch_cpu = play("warp", CUDA), play("torch", CUDA), play("torch", "cpu")
    for key in ("obs", "rewards", "dones"):
        assert torch.equal(getattr(warp, key), getattr(torch_cuda, key)), key
        assert torch.equal(getattr(warp, key).cpu(), getattr(torch_cpu, key)), key
    assert warp.dones.sum() > 512


@pytest.mark.parametrize("renderer", ["warp", "torch"])
def test_rollout_loop_runs_under_cuda_sync_debug_errors(renderer):
    env = make_goal_grid(256, renderer=renderer, device=CUDA)
    env.reset(0)
    net = PackedCNN(2, 5).to(CUDA)
    buffer = PackedRolloutBuffer(16, 256, 2, CUDA)
    generator = torch.Generator(CUDA).manual_seed(0)
    collect_rollout(env, net, buffer, generator)  # warm-up: Warp module load, cuDNN plans
    with no_host_sync(cuda=True):  # torch.cuda.set_sync_debug_mode("error") + Tensor host reads
        collect_rollout(env, net, buffer, generator)
    torch.cuda.synchronize()
    assert buffer.obs[1:].any()


@pytest.mark.parametrize("renderer", ["warp", "torch"])
def test_profiler_finds_no_device_to_host_copies_in_the_loop(renderer):
    from torch.profiler import ProfilerActivity, profile

    env = make_goal_grid(256, renderer=renderer, device=CUDA)
    env.reset(0)
    net = PackedCNN(2, 5).to(CUDA)
    buffer = PackedRolloutBuffer(16, 256, 2, CUDA)
    generator = torch.Generator(CUDA).manual_seed(0)
    collect_rollout(env, net, buffer, generator)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        collect_rollout(env, net, buffer, generator)
    torch.cuda.synchronize()
    names = [event.name for event in prof.events()]
    assert any("Memcpy" not in n for n in names) and len(names) > 100  # the loop was recorded
    syncs = [n for n in names if "DtoH" in n or "Synchronize" in n or "cudaMemcpy" == n]
    assert syncs == []


def test_async_learner_overlaps_on_cuda_streams():
    import lightning as L

    from meeple.phases.packed_ppo.data import PackedRolloutDataModule
    from meeple.phases.packed_ppo.module import PackedPPOModule
    from meeple.seeding import PhaseSeeds

    module = PackedPPOModule(
        PackedCNN(2, 5),
        optimizer=lambda p: torch.optim.Adam(p, lr=5e-4),
        anneal_lr=False,
        max_grad_norm=0.5,
        gamma=0.97,
        gae_lambda=0.95,
        clip_epsilon=0.2,
        entropy_coef=0.01,
        critic_coef=0.5,
        normalize_advantage=True,
        max_importance_weight=2.0,
    )
    dm = PackedRolloutDataModule(
        env_factory=lambda num_envs, device: make_goal_grid(num_envs, device=device),
        seeds=PhaseSeeds(1, 0),
        num_envs=256,
        frames_per_obs=2,
        rollout_steps=16,
        ppo_epochs=2,
        minibatch_size=1024,
        mode="async",
        max_policy_lag=1,
    )
    trainer = L.Trainer(
        accelerator="cuda",
        devices=1,
        max_epochs=4,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(module, datamodule=dm)
    assert dm._actor_stream is not None and dm._actor_stream != torch.cuda.current_stream()
    assert trainer.callback_metrics["perf/policy_lag"].item() == 1.0
    assert dm.policy_version == 4
