"""The independent benchmark is registered and parses its options (it is run by hand, not in CI)."""

from __future__ import annotations

from meeple.bench import BENCHMARKS
from meeple.bench.__main__ import main as bench_main
from meeple.bench.independent import parse_args


def test_registered_and_listed(capsys):
    assert BENCHMARKS["independent"][0] == "meeple.bench.independent"
    assert bench_main([]) == 0
    assert "independent" in capsys.readouterr().out


def test_options_and_overrides():
    args = parse_args(["--out", "x.json", "--steps", "123", "phase.updates_per_step=0.5"])
    assert str(args.out) == "x.json" and args.steps == 123
    assert args.overrides == ["phase.updates_per_step=0.5"]


def test_too_few_steps_to_measure_is_one_line(capsys):
    """--steps 200 measured 0.0 steps/s and a 0.00x ratio (no learner update, one report)."""
    assert bench_main(["independent", "--steps", "200", "--out", "unused.json"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("meeple.bench: error: --steps 200 is too few to measure")
    assert "accepted: --steps >= 1800" in err
