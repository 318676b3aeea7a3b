"""The gym backend on its own: batching, specs and clear errors for bad ids."""

import pytest

from meeple.errors import ConfigError
from meeple.plugins.registry import load_backend
from meeple_gym import GymBackend, backend


def test_entry_point_resolves_to_this_backend():
    assert isinstance(backend, GymBackend)
    assert load_backend("gym") is backend


def test_gym_backend_steps_a_batch_in_one_call():
    env = backend.make_env({"id": "CartPole-v1"}, num_envs=3)
    td = env.rand_step(env.reset())
    assert env.batch_size == (3,)
    assert td["next", "observation"].shape == (3, 4)
    assert env.action_spec.space.n == 2


def test_gym_backend_rejects_bad_ids_and_spaces():
    with pytest.raises(ConfigError, match="env.id='NoSuchEnv-v0'"):
        backend.make_env({"id": "NoSuchEnv-v0"}, num_envs=1)
    with pytest.raises(ConfigError, match="Discrete"):
        backend.make_env({"id": "Pendulum-v1"}, num_envs=1)
    with pytest.raises(ConfigError, match="env.id is required"):
        backend.make_env({"id": "???"}, num_envs=1)


def test_any_gym_id_trains_through_the_platform(tmp_path, monkeypatch):
    from meeple.cli.train import train
    from meeple.config.compose import compose_config

    monkeypatch.chdir(tmp_path)
    cfg = compose_config(["env=gym", "env.id=Acrobot-v1", "debug=tiny", "tracking=none", "callbacks.progress=null"])
    metrics = train(cfg)
    assert metrics["train/frames"] == 96
    assert "eval/episode_return" in metrics


def _play(env, td, steps, seed):
    """Fixed random actions; returns the carried td and every step's (obs, reward sum, count)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    seen = []
    for _ in range(steps):
        td["action"] = torch.randint(0, 2, env.batch_size, generator=generator)
        full, td = env.step_and_maybe_reset(td)
        seen.append(torch.cat([full["next", "observation"], full["next", "episode_reward"],
                               full["next", "step_count"].float()], -1))
    return td, torch.stack(seen)


def test_sim_state_snapshot_continues_episodes_exactly_in_a_fresh_env():
    import io

    import torch

    from meeple.env_factory import make_env

    cfg = {"backend": "gym", "id": "CartPole-v1"}
    env = make_env(cfg, num_envs=3, seed=3)
    td, _ = _play(env, env.reset(), 40, seed=1)  # mid-episode, some envs already reset
    state = backend.get_sim_state(env.base_env)
    buffer = io.BytesIO()
    torch.save(state, buffer)
    state = torch.load(io.BytesIO(buffer.getvalue()), weights_only=True)  # what a checkpoint holds
    _, expected = _play(env, td.clone(), 80, seed=2)

    fresh = make_env(cfg, num_envs=3, seed=999)
    fresh.reset()
    backend.set_sim_state(fresh.base_env, state)
    _, replayed = _play(fresh, td.clone(), 80, seed=2)
    assert torch.equal(expected, replayed)


def test_sim_state_refuses_envs_without_a_state_api():
    from meeple.plugins.spec import EnvSnapshots, SnapshotUnsupported

    assert isinstance(backend, EnvSnapshots)
    env = backend.make_env({"id": "FrozenLake-v1"}, num_envs=1)
    env.reset()
    with pytest.raises(SnapshotUnsupported, match="FrozenLake"):
        backend.get_sim_state(env)
