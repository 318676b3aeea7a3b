import pytest

from meeple.errors import ConfigError, PluginNotFoundError
from meeple.plugins.registry import conf_dirs, installed, load_backend
from meeple.plugins.spec import EnvBackend


def test_gym_plugin_is_registered_through_entry_points():
    assert "gym" in installed()
    backend = load_backend("gym")
    assert isinstance(backend, EnvBackend)
    assert backend.name == "gym"


def test_unknown_backend_lists_installed():
    with pytest.raises(PluginNotFoundError, match=r"env.backend='nope'.*installed: .*gym"):
        load_backend("nope")


def test_plugin_conf_dirs_are_found_without_importing_plugins():
    dirs = conf_dirs()
    assert any((d / "env" / "cartpole.yaml").is_file() for d in dirs)


def test_plugin_env_configs_compose(compose):
    cfg = compose(["env=gym", "env.id=Acrobot-v1"])
    assert cfg.env.backend == "gym" and cfg.env.id == "Acrobot-v1"


def test_gym_backend_steps_a_batch_in_one_call():
    env = load_backend("gym").make_env({"id": "CartPole-v1"}, num_envs=3)
    td = env.rand_step(env.reset())
    assert env.batch_size == (3,)
    assert td["next", "observation"].shape == (3, 4)
    assert env.action_spec.space.n == 2


def test_gym_backend_rejects_bad_ids_and_spaces():
    backend = load_backend("gym")
    with pytest.raises(ConfigError, match="env.id='NoSuchEnv-v0'"):
        backend.make_env({"id": "NoSuchEnv-v0"}, num_envs=1)
    with pytest.raises(ConfigError, match="Discrete"):
        backend.make_env({"id": "Pendulum-v1"}, num_envs=1)
    with pytest.raises(ConfigError, match="env.id is required"):
        backend.make_env({"id": "???"}, num_envs=1)
