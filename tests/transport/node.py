"""The TypeScript reference server (plugins/remote/node): built once per session with npm."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from meeple.transport.launch import ServerProcess, default_address

NODE_DIR = Path(__file__).resolve().parents[2] / "plugins" / "remote" / "node"


def build() -> Path:
    """``npm ci`` (if needed) and ``tsc``; fails (never skips) without node/npm."""
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            pytest.fail(
                f"{tool} is not on PATH: the TypeScript server tests need Node 20 and npm "
                "(https://nodejs.org); they are part of CI and are not skipped"
            )
    env = {**os.environ, "npm_config_fund": "false", "npm_config_audit": "false"}
    if not (NODE_DIR / "node_modules" / "typescript").is_dir():
        done = subprocess.run(
            ["npm", "ci"], cwd=NODE_DIR, capture_output=True, text=True, env=env, timeout=300
        )
        if done.returncode != 0:
            pytest.fail(
                f"npm ci in {NODE_DIR} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
            )
    done = subprocess.run(
        ["npm", "run", "build"], cwd=NODE_DIR, capture_output=True, text=True, env=env, timeout=300
    )
    if done.returncode != 0:
        pytest.fail(f"tsc in {NODE_DIR} failed:\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
    return NODE_DIR / "dist"


def start(dist: Path, transport: str, num_envs: int, address: str | None = None) -> ServerProcess:
    address = address or default_address(transport, "node-connect4")
    command = [
        "node",
        str(dist / "server.js"),
        "--transport",
        transport,
        "--address",
        address,
        "--num-envs",
        str(num_envs),
        "--parent-pid",
        str(os.getpid()),
    ]
    return ServerProcess(
        {},
        transport=transport,
        num_envs=num_envs,
        address=address,
        command=command,
        start_timeout_s=60,
    )
