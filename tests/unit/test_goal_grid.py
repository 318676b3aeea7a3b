"""GoalGrid: the Warp and torch renderers agree bit for bit; the render-into contract holds."""

import pytest
import torch

from meeple.envs import goal_grid_torch
from meeple.envs.goal_grid import make_goal_grid
from meeple.envs.packed import packed_l1, unpack
from meeple.envs.packed_env import PackedEnv
from meeple.phases.packed_ppo.buffer import PackedRolloutBuffer

pytest.importorskip("warp")

N, T = 24, 90  # 90 steps > max_steps: every env resets at least twice


def play(renderer: str, seed: int = 7, n: int = N, steps: int = T):
    env = make_goal_grid(n, renderer=renderer)
    env.reset(seed)
    buffer = PackedRolloutBuffer(steps, n, env.frames_per_obs)
    buffer.actions.copy_(
        torch.randint(0, 5, (steps, n), generator=torch.Generator().manual_seed(3))
    )
    env.render_packed_into(buffer.obs, 0)
    for t in range(steps):
        env.step(buffer.actions, buffer.rewards, buffer.dones, t * n)
        env.render_packed_into(buffer.obs, buffer.obs_offset(t + 1))
    return env, buffer


def test_warp_and_torch_are_bit_identical():
    (warp_env, w), (torch_env, t) = play("warp"), play("torch")
    assert isinstance(warp_env, PackedEnv) and isinstance(torch_env, PackedEnv)
    assert warp_env.renderer == "warp" and torch_env.renderer == "torch"
    assert torch.equal(w.obs, t.obs)
    assert torch.equal(w.rewards, t.rewards)  # multiples of 1/2048: exact on both
    assert torch.equal(w.dones, t.dones)
    assert int(t.dones.sum()) >= N * 2
    ws, ts = warp_env.episode_stats(), torch_env.episode_stats()
    assert {k: v.item() for k, v in ws.items()} == {k: v.item() for k, v in ts.items()}
    for key in ("x", "y", "gx", "gy", "t", "episode", "distance", "ep_return", "last_success"):
        assert torch.equal(getattr(warp_env, key), getattr(torch_env, key)), key


def test_goal_frame_and_reward_follow_the_packed_distance():
    env, buffer = play("torch")
    obs = buffer.obs  # (T+1, N, 2, 72, 20): agent frame, goal frame
    distance = packed_l1(obs[:, :, 0], obs[:, :, 1])
    # L1 on packed bytes equals L1 of the unpacked frames.
    unpacked = (unpack(obs[:, :, 0]).int() - unpack(obs[:, :, 1]).int()).abs().sum(dim=(-2, -1))
    assert torch.equal(distance, unpacked)
    assert (distance[0] > 0).all()  # episodes never start on the goal
    # Steps that do not end an episode: reward = (d_t - d_{t+1}) / 2048 - 1/64.
    cont = ~buffer.dones
    expected = (
        distance[:-1] - distance[1:]
    ).float() / goal_grid_torch.DISTANCE_SCALE - goal_grid_torch.STEP_COST
    assert torch.equal(buffer.rewards[cont], expected[cont])


def test_success_iff_frames_match():
    env = make_goal_grid(1, renderer="torch", max_steps=200)
    env.reset(11)
    buffer = PackedRolloutBuffer(1, 1, 2)
    while True:  # walk straight to the goal: x first, then y
        dx = int(env.gx - env.x)
        dy = int(env.gy - env.y)
        action = 4 if dx > 0 else 3 if dx < 0 else 2 if dy > 0 else 1
        buffer.actions.fill_(action)
        env.render_packed_into(buffer.obs, 0)
        assert not torch.equal(buffer.obs[0, 0, 0], buffer.obs[0, 0, 1])
        env.step(buffer.actions, buffer.rewards, buffer.dones, 0)
        if abs(dx) + abs(dy) == 1:
            break
        assert not buffer.dones.any()
    assert buffer.dones.all() and env.last_success.all()
    assert buffer.rewards.item() > goal_grid_torch.SUCCESS_BONUS - goal_grid_torch.STEP_COST


def test_random_policy_rarely_succeeds():
    env, buffer = play("warp", seed=1, n=128, steps=120)
    stats = env.episode_stats()
    rate = (stats["successes"] / stats["episodes"]).item()
    assert 0.0 < rate < 0.1


def test_render_writes_only_its_slot_and_views_are_built_once():
    env = make_goal_grid(4, renderer="warp")
    env.reset(0)
    buffer = PackedRolloutBuffer(3, 4, 2)
    buffer.obs.fill_(0xAB)  # a sentinel no GoalGrid byte pattern overwrites with itself everywhere
    env.render_packed_into(buffer.obs, buffer.obs_offset(1))
    assert (buffer.obs[0] == 0xAB).all() and (buffer.obs[2:] == 0xAB).all()
    assert not (buffer.obs[1] == 0xAB).all()
    for t in range(3):
        env.step(buffer.actions, buffer.rewards, buffer.dones, t * 4)
        env.render_packed_into(buffer.obs, buffer.obs_offset(t + 1))
    assert len(env._out_views) == 4  # obs, actions, rewards, dones: one view each for the run


def test_same_seed_same_episodes_other_seed_other_episodes():
    a, b, c = (
        play("torch", seed=5, steps=5),
        play("torch", seed=5, steps=5),
        play("torch", seed=6, steps=5),
    )
    assert torch.equal(a[1].obs, b[1].obs)
    assert not torch.equal(a[1].obs, c[1].obs)


@pytest.mark.parametrize("renderer", ["warp", "torch"])
def test_bad_storages_are_named(renderer):
    env = make_goal_grid(4, renderer=renderer)
    env.reset(0)
    with pytest.raises(ValueError, match="out: dtype torch.float32"):
        env.render_packed_into(torch.zeros(4 * 2 * 1440), 0)
    with pytest.raises(ValueError, match="need at least"):
        env.render_packed_into(torch.zeros(100, dtype=torch.uint8), 0)
    buffer = PackedRolloutBuffer(2, 4, 2)
    with pytest.raises(ValueError, match="actions: dtype torch.int32"):
        env.step(buffer.actions.int(), buffer.rewards, buffer.dones, 0)


def test_bad_arguments():
    with pytest.raises(ValueError, match="renderer='gl'; accepted: warp, torch, auto"):
        make_goal_grid(2, renderer="gl")
    with pytest.raises(ValueError, match="num_envs=0"):
        make_goal_grid(0, renderer="torch")


def test_torch_renderer_moves_no_tensor_between_devices_per_step(monkeypatch):
    """Each frame is built from per-device constants: a ``Tensor.to`` in the loop is, on CUDA,
    a synchronous host-to-device copy (what tests/gpu's sync-debug test caught on an H200)."""
    from meeple.envs.goal_grid_torch import TorchGoalGrid

    env = TorchGoalGrid(4)
    env.reset(0)
    env.render_packed_into(torch.zeros(4 * 2 * 72 * 20, dtype=torch.uint8), 0)  # constants made

    to = torch.Tensor.to

    def dtype_only(self, *args, **kwargs):
        if "device" in kwargs or any(isinstance(a, (str, torch.device)) for a in args):
            raise AssertionError(f"Tensor.to{args} inside the env step / render")
        return to(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "to", dtype_only)
    actions, rewards, dones = torch.ones(4, dtype=torch.int64), torch.zeros(4), torch.zeros(4, dtype=torch.bool)
    env.step(actions, rewards, dones, 0)
    env.render_packed_into(torch.zeros(4 * 2 * 72 * 20, dtype=torch.uint8), 0)
