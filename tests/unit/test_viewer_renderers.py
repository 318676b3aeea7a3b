"""Renderer lookup through the ``meeple.viewers`` entry points: found, loaded, or one clear line."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

import meeple.plugins.registry as registry
from meeple.errors import PluginNotFoundError
from meeple.viewer import renderers
from meeple.viewer.renderers import Renderer, installed_viewers, renderer

MODULE = '''
from meeple.viewer.renderers import Renderer
toy = Renderer("toy", "/* toy */")
def make():
    return Renderer("maker", "/* maker */")
wrong = Renderer("other", "")
'''


@pytest.fixture
def viewers(tmp_path, monkeypatch):
    """The registry sees exactly three toy viewers, from a module on a temporary path."""
    (tmp_path / "toy_viewers.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    eps = [EntryPoint("toy", "toy_viewers:toy", registry.VIEWERS_GROUP),
           EntryPoint("maker", "toy_viewers:make", registry.VIEWERS_GROUP),
           EntryPoint("wrong", "toy_viewers:wrong", registry.VIEWERS_GROUP)]
    real = registry.entry_points
    monkeypatch.setattr(registry, "entry_points",
                        lambda group: eps if group == registry.VIEWERS_GROUP else real(group=group))


def test_renderer_or_factory_from_entry_points(viewers):
    assert installed_viewers() == ["maker", "toy", "wrong"]
    assert renderer("toy") == Renderer("toy", "/* toy */")
    assert renderer("maker").js == "/* maker */"


def test_unknown_game_is_one_line_naming_the_games(viewers):
    with pytest.raises(PluginNotFoundError) as err:
        renderer("go")
    assert str(err.value) == "no viewer renderer for game 'go'; installed: maker, toy, wrong"
    with pytest.raises(PluginNotFoundError, match="'toy_viewers:wrong' for viewer 'wrong' does not provide"):
        renderer("wrong")


def test_no_viewer_installed_says_how_to_add_one(monkeypatch):
    monkeypatch.setattr(registry, "entry_points", lambda group: [])
    with pytest.raises(PluginNotFoundError, match=r"installed: none \(a plugin declares one in .*meeple.viewers"):
        renderer("go")


def test_from_package_reads_the_plugins_resources(tmp_path, monkeypatch):
    pkg = tmp_path / "toy_game"
    (pkg / "viewer").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "viewer" / "renderer.js").write_text("/* js */")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert Renderer.from_package("toy", "toy_game") == Renderer("toy", "/* js */", "")
    (pkg / "viewer" / "renderer.css").write_text("/* css */")
    assert Renderer.from_package("toy", "toy_game").css == "/* css */"


def test_the_core_viewer_imports_without_torch():
    import subprocess
    import sys

    code = ("import sys, meeple.viewer.page, meeple.viewer.artifacts; "
            "print(sorted(m for m in ('torch', 'lightning') if m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "[]"
    assert renderers.__name__ == "meeple.viewer.renderers"
