"""Engine logs through the `mjai` package's state tracker, in an isolated venv.

`mjai` is AGPL and pins mahjong~=1.2, so it never enters meeple's environment: this test
builds a throwaway venv (or reuses the one named by MEEPLE_MJAI_VENV) and runs
tools/mjai_check.py there on freshly generated logs.
"""

import os
import subprocess
import venv
from pathlib import Path

import pytest

from meeple_mahjong import legal_dump, selfplay

CHECKER = Path(__file__).resolve().parents[1] / "tools" / "mjai_check.py"


def _mjai_python(tmp_path_factory) -> Path:
    if os.environ.get("MEEPLE_MJAI_VENV"):
        return Path(os.environ["MEEPLE_MJAI_VENV"]) / "bin" / "python"
    root = tmp_path_factory.mktemp("mjai-venv")
    venv.create(root, with_pip=True)
    py = root / "bin" / "python"
    subprocess.run([py, "-m", "pip", "install", "-q", "mjai==0.2.1"], check=True, timeout=600)
    return py


@pytest.mark.slow
def test_engine_logs_pass_mjai_state_tracker(tmp_path_factory, tmp_path):
    py = _mjai_python(tmp_path_factory)
    assert (
        selfplay.main(["--games", "12", "--seed", "21", "--out", str(tmp_path / "a"), "--gzip"])
        == 0
    )
    assert (
        selfplay.main(
            ["--games", "12", "--seed", "22", "--out", str(tmp_path / "b"), "--policy", "random"]
        )
        == 0
    )
    assert (
        selfplay.main(
            [
                "--games",
                "6",
                "--seed",
                "23",
                "--out",
                str(tmp_path / "c"),
                "--east-only",
                "--call-prob",
                "0.7",
            ]
        )
        == 0
    )
    logs = sorted(str(p) for p in tmp_path.glob("*/game_*.mjson*"))
    assert len(logs) == 30
    out = subprocess.run(
        [py, CHECKER, *logs],
        capture_output=True,
        text=True,
        env={**os.environ, "RUST_BACKTRACE": "0"},
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "30/30 logs accepted" in out.stdout


@pytest.mark.slow
def test_legal_actions_match_mjai_state_tracker(tmp_path_factory, tmp_path):
    # Per decision, the kinds of action we offer (discard, riichi, tsumo, ron, chi low/mid/
    # high, pon, daiminkan, ankan, kakan, nine terminals) equal libriichi's candidates.
    py = _mjai_python(tmp_path_factory)
    logs = legal_dump.dump(tmp_path / "d", 20, seed=31)
    logs += legal_dump.dump(tmp_path / "e", 6, seed=32, east_only=True, red_fives=False)
    out = subprocess.run(
        [py, CHECKER, "--legal", *map(str, logs)],
        capture_output=True,
        text=True,
        env={**os.environ, "RUST_BACKTRACE": "0"},
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "26/26 logs accepted" in out.stdout
