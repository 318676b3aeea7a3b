"""The README's `python train.py ...` commands from a fresh clone with no ``../shared`` beside it.

A user's clone holds the committed files only and no outside data. The clone runs its own code
(its src/ folders first on PYTHONPATH) with the installed dependencies and meeple_native; each
command gets tiny overrides and must exit 0. About 100 s on 2 shared cores.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO

# (the command as the README prints it, the overrides that make it take seconds)
COMMANDS = [
    ("python train.py", ["debug=tiny"]),  # tracking on: MLflow's sqlite file inside the clone
    ("python train.py +experiment=cartpole_ppo hardware=cpu seed=7 phase.lr=1e-3", ["debug=tiny", "tracking=none"]),
    ("python train.py +experiment=connect4_alphazero", ["debug=tiny", "tracking=none"]),
    ("python train.py +experiment=chess_alphazero", ["debug=tiny", "tracking=none"]),
    ("python train.py +experiment=mahjong_ppo", ["debug=tiny", "tracking=none"]),
    ("python train.py +experiment=pixels_ppo", ["debug=tiny", "tracking=none"]),
    ("python train.py --cfg job", []),
]
SOURCES = ("src", "plugins/gym/src", "plugins/connect4/src", "plugins/chess/src", "plugins/mahjong/src",
           "plugins/autobattler/src")


def _git_toplevel() -> str | None:
    if shutil.which("git") is None:
        return None
    done = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    top = _git_toplevel()
    if top is None or os.path.realpath(top) != os.path.realpath(REPO):
        pytest.skip(f"{REPO} is not a git checkout: nothing to clone")
    root = tmp_path_factory.mktemp("bare") / "meeple"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(root)], check=True, timeout=120)
    assert not (root.parent / "shared").exists()
    # the clone's own code runs, not the checkout the tests were started from
    probe = subprocess.run([sys.executable, "-c", "import meeple; print(meeple.__file__)"], cwd=root,
                           env=_env(root), capture_output=True, text=True, timeout=120)
    assert probe.stdout.strip().startswith(str(root)), probe.stdout + probe.stderr
    return root


def _env(root) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "MEEPLE_CONF_DIR"}
    paths = [str(root / s) for s in SOURCES] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


@pytest.mark.slow
@pytest.mark.parametrize("command, tiny", COMMANDS, ids=[c for c, _ in COMMANDS])
def test_readme_command_runs_from_a_bare_clone(clone, command, tiny):
    assert command in (REPO / "README.md").read_text(), f"the README no longer shows {command!r}"
    args = [sys.executable, *shlex.split(command)[1:], *tiny]
    done = subprocess.run(args, cwd=clone, env=_env(clone), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{' '.join(args[1:])} exited {done.returncode}:\n{(done.stdout + done.stderr)[-3000:]}"
