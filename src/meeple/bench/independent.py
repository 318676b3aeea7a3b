"""Independent-learners benchmark: the multi-process topology vs one sequential loop, same work.

    python -m meeple.bench independent --out independent.json [--steps 4000] [overrides...]

Both train the agents of ``+experiment=independent_dqn`` (``overrides`` change it for both) for
``--steps`` env steps with the same update budget (``phase.updates_per_step`` per agent per env
step after ``phase.learning_starts``):

- ``topology``: :mod:`meeple.phases.dqn` (1 actor process + 1 learner process per agent,
  shared-memory models and buffers, publish/sync);
- ``sequential``: :func:`meeple.phases.dqn.sequential.run_sequential`, one process acting and
  then updating every agent in turn, with no shared memory, publish or sync.

Rates are measured in steady state for the topology: env steps/s between the actor's first and
last progress reports, updates/s from the actor's first report until every learner has done its
whole update budget (process start-up, imports and the final evaluation excluded); over the
whole loop for the sequential baseline (which has no start-up inside its loop). Learner
updates/s adds all agents. On a machine with fewer cores than processes the topology's
processes share cores, so its ratio says as much about the machine as about the design: the
core count is recorded with the results. Results are written to ``--out`` atomically.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf

from meeple.cli.parsing import OneLineParser
from meeple.config.compose import compose_config
from meeple.errors import ConfigError
from meeple.jsonio import write_json_atomic
from meeple.phases.dqn.run import build_independent, dqn_kwargs
from meeple.phases.dqn.sequential import run_sequential
from meeple.phases.dqn.state import Report
from meeple.phases.registry import validate


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = OneLineParser(
        prog="python -m meeple.bench independent", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--out", type=Path, default=Path("independent.json"), help="JSON results file"
    )
    parser.add_argument(
        "--steps", type=int, default=4000, help="env steps per implementation (default 4000)"
    )
    parser.add_argument(
        "overrides", nargs="*", help="config overrides for both, e.g. phase.updates_per_step=0.5"
    )
    return parser.parse_args(argv)


def check_steps(steps: int, phase: Any) -> None:
    """Rates need updates and two actor reports: fewer steps would measure 0 steps/s."""
    least = phase.learning_starts + 4 * phase.report_interval
    if steps < least:
        raise ConfigError(
            f"--steps {steps} is too few to measure: learners start after phase.learning_starts="
            f"{phase.learning_starts} env steps and the rates need actor reports every "
            f"phase.report_interval={phase.report_interval}; accepted: --steps >= {least}"
        )


def measure_topology(cfg) -> dict[str, Any]:
    run = build_independent(cfg)
    marks: list[tuple[float, int, int]] = []  # (time, env steps, total updates) at actor reports

    def on_report(kind: str, sender: str, payload: dict[str, Any]) -> None:
        if kind == Report.ACTOR:
            marks.append((time.perf_counter(), payload["env_steps"], sum(run.state.updates)))

    t0 = time.perf_counter()
    try:
        run.topology.start()
        run.topology.run(on_report)
        t_end = time.perf_counter()
        updates = list(run.state.updates)
    finally:
        run.topology.close()
    (ta, sa, ua), (tb, sb, _) = marks[0], marks[-1]
    return {
        "env_steps": run.phase.total_env_steps,
        "updates": updates,
        "wall_s": t_end - t0,
        "first_report_s": ta - t0,  # process start-up + the first report_interval steps
        # env steps over the actor's reports; updates until the learners finished their budget
        "env_steps_per_s": (sb - sa) / max(tb - ta, 1e-9),
        "updates_per_s": (sum(updates) - ua) / max(t_end - ta, 1e-9),
        "learners_behind_at_actor_end_s": t_end - tb,
    }


def measure_sequential(cfg) -> dict[str, Any]:
    from meeple.envs.pettingzoo import agent_specs, make_pettingzoo_env

    phase = validate(cfg)["phase"]
    env_cfg = OmegaConf.to_container(cfg.env, resolve=True)
    probe = make_pettingzoo_env(env_cfg, seed=0)
    agents = agent_specs(probe)
    probe.close()
    result, actor = run_sequential(
        phase,
        env_cfg,
        agents,
        OmegaConf.to_container(cfg.phase.optimizer, resolve=True),
        seed=int(cfg.seed),
        dqn=dqn_kwargs(phase),
    )
    actor.close()
    return {
        "env_steps": result.env_steps,
        "updates": result.updates,
        "wall_s": result.wall_s,
        "act_s": result.act_s,
        "learn_s": result.learn_s,
        "env_steps_per_s": result.env_steps / max(result.wall_s, 1e-9),
        "updates_per_s": sum(result.updates) / max(result.wall_s, 1e-9),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv or [])
    torch.set_num_threads(1)
    overrides = [
        "+experiment=independent_dqn",
        "tracking=none",
        f"phase.total_env_steps={args.steps}",
        *args.overrides,
    ]
    cfg = compose_config(overrides)
    try:
        check_steps(args.steps, validate(cfg)["phase"])
    except ConfigError as err:
        print(f"meeple.bench: error: {err}", file=sys.stderr)
        return 2
    results: dict[str, Any] = {
        "benchmark": "independent",
        "overrides": overrides,
        "machine": {
            "host": platform.node(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "load_avg_1m": os.getloadavg()[0],
        },
    }
    print(f"independent benchmark: {args.steps} env steps each, {os.cpu_count()} CPUs")
    for name, measure in (("sequential", measure_sequential), ("topology", measure_topology)):
        print(f"  running {name} ...", flush=True)
        results[name] = measure(cfg)
        write_json_atomic(args.out, results)
    seq, top = results["sequential"], results["topology"]
    results["ratios_topology_over_sequential"] = {
        k: top[k] / max(seq[k], 1e-9) for k in ("env_steps_per_s", "updates_per_s")
    }
    results["machine"]["load_avg_1m_end"] = os.getloadavg()[0]
    write_json_atomic(args.out, results)
    print(f"{'':12}{'env steps/s':>14}{'updates/s':>12}")
    for name in ("sequential", "topology"):
        print(
            f"{name:12}{results[name]['env_steps_per_s']:>14.1f}{results[name]['updates_per_s']:>12.1f}"
        )
    ratios = results["ratios_topology_over_sequential"]
    print(f"{'ratio':12}{ratios['env_steps_per_s']:>13.2f}x{ratios['updates_per_s']:>11.2f}x")
    print(f"wrote {args.out}")
    return 0
