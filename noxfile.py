"""Developer sessions. `nox -s tests` mirrors CI; `nox --no-venv -s smoke` reuses the current env."""

import os
from pathlib import Path

import nox

nox.options.sessions = ["lint", "tests"]
# native/ is installed non-editable: an editable scikit-build-core install does not
# rebuild after C++ edits, so a stale extension could run silently.
INSTALL = (
    "torch==2.13.0",
    "-e", ".[test]",
    "-e", "./plugins/gym",
    "-e", "./plugins/connect4",
    "-e", "./plugins/chess",
    "-e", "./plugins/mahjong",
    "-e", "./plugins/autobattler",
    "./native",
)


def _install(session: nox.Session) -> None:
    if session.venv_backend != "none":
        session.install(*INSTALL)


@nox.session
def tests(session: nox.Session) -> None:
    """The whole suite, slow learning checks included (what CI runs)."""
    _install(session)
    session.run("python", "-m", "pytest", *session.posargs)


@nox.session
def configs(session: nox.Session) -> None:
    """Every experiment x hardware profile composes and instantiates."""
    _install(session)
    session.run("python", "-m", "pytest", "tests/configs", *session.posargs)


@nox.session
def smoke(session: nox.Session) -> None:
    """The real CLI with debug=tiny, in subprocesses."""
    _install(session)
    session.run("python", "-m", "pytest", "tests/smoke", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    if session.venv_backend != "none":
        session.install("ruff", "import-linter>=2.16")
    session.run("ruff", "check", "src", "plugins", "tests", "train.py", "noxfile.py")
    # import contracts (pyproject [tool.importlinter]) over the core and every plugin; the graph is
    # read from source, not imported
    sources = ["src", *sorted(str(p) for p in Path("plugins").glob("*/src"))]
    session.run("lint-imports", "--no-cache", env={"PYTHONPATH": os.pathsep.join(sources)})


@nox.session
def bench(session: nox.Session) -> None:
    """PPO benchmark against plain TorchRL and a plain PyTorch loop (minutes)."""
    _install(session)
    session.run("python", "-m", "meeple.bench", "ppo", "--out", "ppo.json", *session.posargs)
