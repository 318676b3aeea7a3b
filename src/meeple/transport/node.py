"""The TypeScript host library (``plugins/remote/node``): build it and start its server.

Games written in TypeScript (Connect Four, the auto-battler) are served by ``node dist/server.js``
over the same protocol as ``python -m meeple.serve``; :class:`ServerProcess` starts it with
:func:`server_command`. The build (``npm ci``, then ``npm run build``: TypeScript and the
shared-memory addon) runs once, and again when a source file is newer than the build.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

from meeple.errors import ConfigError

NODE_DIR_ENV = "MEEPLE_NODE_DIR"
# packages whose absence means node_modules predates package-lock.json: run ``npm ci``
NODE_PACKAGES = ("typescript", "@types/node", "node-api-headers")


def node_dir() -> Path:
    """The host library's folder: ``$MEEPLE_NODE_DIR``, else the repository's ``plugins/remote/node``."""
    path = Path(os.environ.get(NODE_DIR_ENV) or Path(__file__).resolve().parents[3] / "plugins/remote/node")
    if not (path / "package.json").is_file():
        raise ConfigError(
            f"no TypeScript host library at {path} (package.json missing): run from a meeple "
            f"checkout, or set {NODE_DIR_ENV} to its plugins/remote/node folder"
        )
    return path


def _stale(folder: Path) -> bool:
    built = folder / "dist" / "server.js"
    if not built.is_file():
        return True
    sources = [p for sub in ("src", "native", "scripts") for p in (folder / sub).rglob("*") if p.is_file()]
    newest = max((p.stat().st_mtime for p in sources + [folder / "package.json"]), default=0.0)
    return newest > built.stat().st_mtime


_built: set[Path] = set()  # built by this process: a run never rebuilds under its own servers


def build(force: bool = False) -> Path:
    """``npm ci`` (when node_modules lacks a package) and ``npm run build`` (when a source is newer
    than the build, or ``force``); returns ``dist/``. Raises :class:`ConfigError` saying why not."""
    folder = node_dir()
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            raise ConfigError(
                f"{tool} is not on PATH: games served from TypeScript need Node 20 and npm "
                "(https://nodejs.org)"
            )
    if not force and (folder in _built or not _stale(folder)):
        _built.add(folder)
        return folder / "dist"
    # Several processes may start Node servers at once (test workers, sweep workers): one builds,
    # the others wait for it and find the build fresh (npm ci wipes node_modules under a reader).
    with open(folder / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if force or _stale(folder):
            _run_build(folder)
    _built.add(folder)
    return folder / "dist"


def _run_build(folder: Path) -> None:
    env = {**os.environ, "npm_config_fund": "false", "npm_config_audit": "false"}
    steps = [["npm", "run", "build"]]
    if not all((folder / "node_modules" / p).is_dir() for p in NODE_PACKAGES):
        steps.insert(0, ["npm", "ci"])
    for cmd in steps:
        done = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, env=env, timeout=600)
        if done.returncode != 0:
            raise ConfigError(
                f"`{' '.join(cmd)}` in {folder} failed:\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}"
            )


def server_command(
    game: str,
    *,
    transport: str,
    address: str,
    num_envs: int,
    num_workers: int | None = None,
    wait: dict[str, float] | None = None,
) -> list[str]:
    """The command line of the Node server hosting ``num_envs`` envs of ``game`` (built first).

    ``num_workers``: worker threads (None: the server's default, 1 for shm, none otherwise);
    ``wait``: ``spin_us``, ``yield_us``, ``timeout_s`` of conf/transport for its shm waits."""
    dist = build()
    cmd = [
        "node",
        str(dist / "server.js"),
        "--game",
        game,
        "--transport",
        transport,
        "--address",
        address,
        "--num-envs",
        str(num_envs),
        "--parent-pid",
        str(os.getpid()),
    ]
    if num_workers is not None:
        cmd += ["--num-workers", str(num_workers)]
    for key, value in (wait or {}).items():
        cmd += ["--" + key.replace("_", "-"), str(value)]
    return cmd
