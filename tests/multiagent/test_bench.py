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


def test_progress_in_a_log_is_plain_lines_of_at_most_80(capsys):
    """Off a terminal, independent DQN's progress is plain lines (it was a 124-character rich
    frame with bar glyphs per report)."""
    from meeple.phases.dqn.run import RunMonitor
    from meeple.phases.dqn.state import Report

    agents = ["agent_0", "agent_1"]
    monitor = RunMonitor(agents, total_steps=400, plain_every_s=0.0)
    monitor(Report.EPISODE, "actor", {"env_steps": 25, "returns": {"agent_0": -21.25, "agent_1": -19.5}})
    for agent in agents:
        monitor(Report.LEARNER, agent, {"agent": agent, "updates": 123456, "version": 3, "loss": 0.5,
                                        "updates_per_s": 50.0, "env_steps": 200})
    monitor(Report.ACTOR, "actor", {"env_steps": 400, "epsilon": 0.1, "versions": [3, 3],
                                     "waited_s": 0.5})
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and all(len(line) <= 80 and line.isascii() for line in lines), lines
    assert lines[-1].startswith("env steps 400/400 ") and "agent_0: return -21.2" in lines[-1]
