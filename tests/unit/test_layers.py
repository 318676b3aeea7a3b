"""The import-linter contracts of pyproject.toml ([tool.importlinter]) hold: the core imports no
plugin, core packages are layered, and no sibling packages or modules import each other in a
cycle. On failure the assertion carries import-linter's report (the chain that breaks a contract).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# import-linter is a test dependency (pyproject: the `test` extra); its API in a subprocess so the
# graph is built from the source tree given on PYTHONPATH, not from this process's modules.
LINT = (
    "import sys\n"
    "from importlinter.cli import lint_imports\n"
    "sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True, no_logo=True))\n"
)


def lint(src: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), *sys.path])}
    return subprocess.run([sys.executable, "-c", LINT, str(REPO / "pyproject.toml")],
                          cwd=src, env=env, capture_output=True, text=True, timeout=300)  # fmt: skip


def test_import_contracts_are_kept():
    done = lint(REPO / "src")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 3 kept, 0 broken." in done.stdout, done.stdout


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
