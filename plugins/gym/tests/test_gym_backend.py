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
