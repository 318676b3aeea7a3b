"""The core's code and configs name no game: everything about one game (recipes, presets,
transitions, benchmarks, evaluation callbacks) lives in its plugin (docs/architecture.md).

The same check by hand: ``git grep -inE "<GAMES>" -- src conf train.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GAMES = re.compile(
    r"mahjong|chess|connect ?4|connect[_ ]four|auto-?battler|cartpole|tenhou|riichi", re.IGNORECASE
)
CORE = ("src", "conf", "train.py")
# path -> why it may still name a game; each entry must still be needed (checked below)
ALLOWED = {
    "src/meeple/transport/node.py": "its docstring's examples; the transport package is another change's",
}


def _core_files() -> list[Path]:
    files = []
    for top in CORE:
        path = REPO / top
        found = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        files += [p for p in found if "__pycache__" not in p.parts and not p.name.endswith(".egg-info")]
    return files


def _hits() -> dict[str, list[str]]:
    hits: dict[str, list[str]] = {}
    for path in _core_files():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        rel = path.relative_to(REPO).as_posix()
        for number, line in enumerate(text.splitlines(), 1):
            if GAMES.search(line):
                hits.setdefault(rel, []).append(f"{rel}:{number}: {line.strip()}")
    return hits


def test_core_code_and_configs_name_no_game():
    hits = _hits()
    found = [line for rel, lines in sorted(hits.items()) if rel not in ALLOWED for line in lines]
    assert not found, "game names in core code or configs (move it to plugins/<game>/):\n" + "\n".join(found)
    assert set(ALLOWED) <= set(hits), f"exceptions no longer needed: {sorted(set(ALLOWED) - set(hits))}"


def test_the_scan_sees_a_game_name():
    assert GAMES.search("python train.py +experiment=connect4_alphazero")
    assert GAMES.search("CartPole-v1") and GAMES.search("Connect Four") and GAMES.search("the auto-battler")
    assert not GAMES.search("python train.py +experiment=pixels_ppo env=goal_grid")
