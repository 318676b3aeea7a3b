"""tools/gpu_checks.sh (docs/gpu.md) parses, and on a machine without CUDA stops with one clear line."""

import subprocess
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "gpu_checks.sh"


def test_script_parses():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the no-CUDA path")
def test_without_cuda_it_says_so_and_runs_nothing(tmp_path):
    done = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 100
    assert "CUDA is not available here" in done.stderr
    assert not list((tmp_path / "out").glob("*.log"))
