import pytest

from meeple.errors import PluginNotFoundError
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
