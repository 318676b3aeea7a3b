"""The import-linter contracts of pyproject.toml ([tool.importlinter]) hold: the core imports no
plugin, no plugin imports another, the core's packages and the mahjong plugin's modules are
layered, and no sibling packages or modules import each other in a cycle. On failure the
assertion carries import-linter's report (the chain that breaks a contract).

The contracts count imports inside functions but not those under TYPE_CHECKING;
`test_no_import_circles` counts both, so a circle cannot hide behind annotations either.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("meeple", "meeple_gym", "meeple_connect4", "meeple_chess", "meeple_mahjong", "meeple_autobattler")
# Imports left out of the circle check, each with why it exists (none today).
CIRCLE_EXEMPT: set[tuple[str, str]] = set()
# import-linter is a test dependency (pyproject: the `test` extra); its API in a subprocess so the
# graph is built from this checkout's source trees given on PYTHONPATH, whatever is installed.
LINT = (
    "import sys\n"
    "from importlinter.cli import lint_imports\n"
    "sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True, no_logo=True))\n"
)


def lint(first: Path) -> subprocess.CompletedProcess:
    """lint-imports over this checkout's core and plugins, with ``first`` ahead of them on the path
    (a copy with violations planted)."""
    sources = [first, REPO / "src", *sorted((REPO / "plugins").glob("*/src"))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*map(str, sources), *sys.path])}
    return subprocess.run([sys.executable, "-c", LINT, str(REPO / "pyproject.toml")],
                          cwd=first, env=env, capture_output=True, text=True, timeout=300)  # fmt: skip


def test_import_contracts_are_kept():
    done = lint(REPO / "src")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 6 kept, 0 broken." in done.stdout, done.stdout


def import_circles(graph: grimp.ImportGraph, packages: tuple[str, ...]) -> list[list[str]]:
    """The modules of ``packages`` that reach themselves through imports, one sorted list per circle."""
    seen, circles = set(), []
    for module in sorted(graph.modules):
        if module in seen or module.split(".")[0] not in packages:
            continue
        circle = graph.find_upstream_modules(module) & graph.find_downstream_modules(module)
        if circle:
            seen |= circle | {module}
            circles.append(sorted(circle | {module}))
    return circles


def test_no_import_circles():
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=False, cache_dir=None)
    for importer, imported in CIRCLE_EXEMPT:
        assert graph.direct_import_exists(importer=importer, imported=imported), (importer, imported)
        graph.remove_import(importer=importer, imported=imported)
    assert import_circles(graph, PACKAGES) == []


def test_the_circle_check_counts_imports_inside_functions_and_for_type_checking(tmp_path, monkeypatch):
    pkg = tmp_path / "circled"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("import circled.b\n")
    (pkg / "b.py").write_text("def f():\n    import circled.a\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    import circled.d\n")
    (pkg / "d.py").write_text("import circled.c\n")
    (pkg / "e.py").write_text("import circled.a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("circled", exclude_type_checking_imports=False, cache_dir=None)
    assert import_circles(graph, ("circled",)) == [["circled.a", "circled.b"], ["circled.c", "circled.d"]]


def test_contracts_catch_a_plugin_import_and_an_upward_import(tmp_path):
    # A copy of the core with two violations: envs imports a plugin and the transport above it.
    shutil.copytree(REPO / "src" / "meeple", tmp_path / "meeple",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    with open(tmp_path / "meeple" / "envs" / "counter.py", "a") as f:
        f.write("\nimport meeple_mahjong  # noqa\nfrom meeple.transport import client  # noqa\n")
    done = lint(tmp_path)
    assert done.returncode == 1
    report = done.stdout
    assert "The core imports no plugin (plugins reach the core through entry points) BROKEN" in report
    assert "meeple.envs.counter -> meeple_mahjong" in report
    assert "Core packages are layered: each imports only from the layers below it BROKEN" in report
    assert "meeple.envs is not allowed to import meeple.transport" in report
    assert "No import cycles between sibling packages or modules anywhere in the core BROKEN" in report


def test_contracts_catch_a_plugin_importing_another_and_a_circle_in_a_plugin(tmp_path):
    # A copy of the mahjong plugin whose specs (the bottom layer) import another plugin and the
    # env backend, which imports specs back.
    shutil.copytree(REPO / "plugins" / "mahjong" / "src" / "meeple_mahjong", tmp_path / "meeple_mahjong",
                    ignore=shutil.ignore_patterns("__pycache__", "conf"))  # fmt: skip
    with open(tmp_path / "meeple_mahjong" / "specs.py", "a") as f:
        f.write("\nimport meeple_chess  # noqa\nfrom meeple_mahjong import env  # noqa\n")
    done = lint(tmp_path)
    assert done.returncode == 1
    report = done.stdout
    assert "No plugin imports another (each builds on the core alone) BROKEN" in report
    assert "meeple_mahjong.specs -> meeple_chess" in report
    assert "Mahjong modules are layered: each imports only from the layers below it BROKEN" in report
    assert "meeple_mahjong.specs is not allowed to import meeple_mahjong.env" in report
    assert "No import cycles between sibling packages or modules in any plugin BROKEN" in report
