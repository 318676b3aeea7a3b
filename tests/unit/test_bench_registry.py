"""``python -m meeple.bench`` lists and runs benchmarks that plugins declare (``meeple.benchmarks``)
next to the core's own, without the core importing any plugin."""

from __future__ import annotations

import re
from importlib.metadata import EntryPoint

import pytest

import meeple.plugins.registry as registry
from meeple.bench import BENCHMARKS
from meeple.bench.__main__ import main as bench_main

FAKE = '''
def main(argv):
    """fake engine: moves per second"""
    print("fake ran with", argv)
    return 3
'''


@pytest.fixture
def plugin_benchmarks(tmp_path, monkeypatch):
    """Entry points of a fake plugin: one benchmark, one that does not import, one core clash."""
    (tmp_path / "fake_bench_plugin.py").write_text(FAKE)
    monkeypatch.syspath_prepend(str(tmp_path))
    eps = [
        EntryPoint("fake", "fake_bench_plugin:main", registry.BENCHMARKS_GROUP),
        EntryPoint("broken", "no_such_module_here:main", registry.BENCHMARKS_GROUP),
        EntryPoint("ppo", "fake_bench_plugin:main", registry.BENCHMARKS_GROUP),
    ]
    real = registry.entry_points
    monkeypatch.setattr(
        registry, "entry_points",
        lambda group: eps if group == registry.BENCHMARKS_GROUP else real(group=group),
    )


def test_plugin_benchmark_is_listed_with_its_docstring(plugin_benchmarks, capsys):
    assert bench_main(["list"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"\n  fake +fake engine: moves per second\n", out)
    assert "broken" in out and "(does not import: No module named 'no_such_module_here')" in out
    assert all(name in out for name in BENCHMARKS)


def test_plugin_benchmark_runs_with_its_arguments(plugin_benchmarks, capsys):
    assert bench_main(["fake", "--out", "f.json"]) == 3
    assert "fake ran with ['--out', 'f.json']" in capsys.readouterr().out


def test_core_name_is_not_shadowed_by_a_plugin(plugin_benchmarks, capsys):
    with pytest.raises(SystemExit) as done:  # argparse's --help
        bench_main(["ppo", "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "python -m meeple.bench ppo" in out and "fake ran" not in out


def test_unknown_benchmark_lists_plugin_ones(plugin_benchmarks, capsys):
    assert bench_main(["nope"]) == 2
    assert "available: broken, collect, export, fake, independent," in capsys.readouterr().err
