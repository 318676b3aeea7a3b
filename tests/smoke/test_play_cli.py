"""``python -m meeple.play`` in a subprocess, as a user runs it: the URL line, a game served on
127.0.0.1 (a move, a refused one), Ctrl-C ends it with exit code 0.

The plugins' ``meeple.play`` and ``meeple.viewers`` entry points are read from this checkout's
pyproject files into a throwaway ``.dist-info`` on the subprocess's path (the shared editable
installs may predate them), so the command looks them up exactly as after a fresh install."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from tests.browser.checkpoints import alphazero_checkpoint
from tests.browser.driver import source_entry_points
from tests.conftest import REPO

GROUPS = ("meeple.play", "meeple.viewers")


def declared_entry_points(folder: Path) -> Path:
    """A distribution on ``folder`` that declares the checkout's play and viewer entry points."""
    info = folder / "meeple_checkout_entry_points-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: meeple-checkout-entry-points\nVersion: 0\n")
    sections = []
    for group in GROUPS:
        eps = source_entry_points(group)
        sections.append(f"[{group}]\n" + "".join(f"{name} = {ep.value}\n" for name, ep in eps.items()))
    (info / "entry_points.txt").write_text("\n".join(sections))
    return folder


def request(url: str, body: bytes | None = None) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=body), timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_the_command_serves_a_game_until_ctrl_c(tmp_path):
    ckpt = alphazero_checkpoint("connect4", tmp_path / "c4.pt")
    env = dict(os.environ)
    paths = [str(declared_entry_points(tmp_path / "meta")), str(REPO / "src"),
             *(str(p) for p in sorted((REPO / "plugins").glob("*/src"))), env.get("PYTHONPATH", "")]  # fmt: skip
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    env["PYTHONFAULTHANDLER"] = "1"  # a SIGABRT makes it print every thread's stack (see the end)
    proc = subprocess.Popen([sys.executable, "-m", "meeple.play", str(ckpt), "--seat", "1", "--simulations", "8"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        line = proc.stdout.readline()
        assert line.startswith("meeple: playing connect4 at http://127.0.0.1:"), line + proc.stderr.read()
        url = line.split(" at ")[1].split()[0]
        status, state = request(url + "api/state")
        assert status == 200 and state["human_seat"] == 1 and len(state["last"]) == 1  # the agent opened
        column = state["legal"][0]["id"]
        status, after = request(url + "api/move", json.dumps({"action": column}).encode())
        assert status == 200 and len(after["last"]) == 1
        status, refused = request(url + "api/move", b'{"action": "9"}')
        assert status == 400 and "not legal" in refused["error"]
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            # Seen once in a full suite run (2026-12-07), not reproduced in 60 tries under load:
            # the command then did not exit within 30 s of Ctrl-C. Say where it stood.
            proc.send_signal(signal.SIGABRT)
            _, err = proc.communicate(timeout=30)
            raise AssertionError(f"meeple.play did not exit 30 s after Ctrl-C; its stderr and threads:\n{err[-8000:]}") from None
    assert code == 0
