"""PPO benchmark: meeple's default run vs plain TorchRL vs plain PyTorch.

    python -m meeple.bench ppo --out ppo.json [--seeds 1 2 3] [--impls meeple torchrl plain] [overrides...]

All three train on the same env with the same hyperparameters, read from
meeple's composed default config (``overrides`` change it for all three), and
stop on the same rule: every ``phase.eval.every_n_rollouts`` rollouts,
``phase.eval.episodes`` greedy episodes; solved once their mean return reaches
``phase.stop.eval_return`` (or the run ends at ``phase.total_frames``).

- ``meeple``: ``meeple.cli.train.run`` (Hydra config, Lightning, MLflow to a temp sqlite db);
- ``torchrl``: :mod:`meeple.bench.torchrl_ppo`, TorchRL without Lightning or Hydra;
- ``plain``: :mod:`meeple.bench.plain_ppo`, Gymnasium + PyTorch only.

Each (implementation, seed) runs in a fresh ``python -m meeple.bench._worker``
process with one torch thread; runs go one at a time, seeds outermost so drift
on the machine spreads over all implementations. Timing definitions are in
:mod:`meeple.bench.common`. Results (per-seed numbers, summaries, ratios,
machine info) are written to ``--out`` atomically after every run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from meeple.jsonio import write_json_atomic
from meeple.provenance import git_state

IMPLS = ("meeple", "torchrl", "plain")
DEFAULT_SEEDS = (1, 2, 3)

# (key in a run's result, column title, format); "process_s" is measured here.
METRICS = (
    ("time_to_solve_s", "time to solve (s)", "{:.1f}"),
    ("cpu_time_to_solve_s", "CPU time to solve (s)", "{:.1f}"),
    ("frames_to_solve", "frames to solve", "{:,.0f}"),
    ("collect_fps", "collect fps", "{:,.0f}"),
    ("update_fps", "update fps", "{:,.0f}"),
    ("overall_fps", "overall fps", "{:,.0f}"),
    ("sec_per_frame", "us / frame", "{:.0f}"),
    ("process_s", "process wall (s)", "{:.1f}"),
)
# Ratios meeple / baseline: (name, result key); per-frame costs are seconds per frame.
RATIOS = (
    ("time_to_solve", "time_to_solve_s"),
    ("cpu_time_to_solve", "cpu_time_to_solve_s"),
    ("sec_per_frame_overall", "sec_per_frame"),
    ("sec_per_frame_collect", "collect_sec_per_frame"),
    ("sec_per_frame_update", "update_sec_per_frame"),
)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m meeple.bench ppo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("ppo.json"), help="JSON results file (default: ppo.json)")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(DEFAULT_SEEDS))
    parser.add_argument("--impls", nargs="+", choices=IMPLS, default=list(IMPLS))
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per run before it is killed")
    parser.add_argument("overrides", nargs="*", help="config overrides for all implementations, e.g. phase.lr=3e-4")
    # key=value tokens are overrides wherever they stand (``--seeds 1 2 phase.lr=3e-4`` included).
    overrides = [a for a in argv if "=" in a and not a.startswith("-")]
    args = parser.parse_args([a for a in argv if a not in overrides])
    args.overrides = [*args.overrides, *overrides]
    return args


# -- running -------------------------------------------------------------------------


def run_one(impl: str, seed: int, overrides: list[str], workdir: Path, timeout: float) -> dict[str, Any]:
    """One run in a fresh process; its result plus ``process_s`` (or ``error``)."""
    result_file = workdir / f"{impl}-{seed}.json"
    log_file = workdir / f"{impl}-{seed}.log"
    cmd = [sys.executable, "-m", "meeple.bench._worker", impl, str(seed), "--result", str(result_file), *overrides]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    with log_file.open("w") as log:
        try:
            proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=timeout)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    process_s = time.perf_counter() - start
    load = {"loadavg_1min_before": load_before, "loadavg_1min_after": os.getloadavg()[0]}
    if rc != 0 or not result_file.exists():
        tail = log_file.read_text(errors="replace").splitlines()[-30:]
        return {"impl": impl, "seed": seed, "error": f"worker exit {rc}", "log_tail": tail, "process_s": process_s,
                **load}
    result = json.loads(result_file.read_text())
    result.update(process_s=process_s, **load)
    return result


def with_derived(result: dict[str, Any]) -> dict[str, Any]:
    if "error" in result:
        return result
    frames = max(result["frames_to_solve"], 1)
    result["collect_sec_per_frame"] = result["collect_s"] / frames
    result["update_sec_per_frame"] = result["update_s"] / frames
    return result


# -- summarising -----------------------------------------------------------------------


def summarize(runs: list[dict[str, Any]], impls: list[str]) -> dict[str, Any]:
    """Per implementation: mean/median/min/max of each metric over its successful runs."""
    keys = [key for key, _, _ in METRICS] + ["collect_sec_per_frame", "update_sec_per_frame", "eval_s"]
    summary: dict[str, Any] = {}
    for impl in impls:
        ok = [r for r in runs if r["impl"] == impl and "error" not in r]
        entry: dict[str, Any] = {
            "runs": len([r for r in runs if r["impl"] == impl]),
            "errors": len([r for r in runs if r["impl"] == impl and "error" in r]),
            "solved": sum(bool(r["solved"]) for r in ok),
            "unsolved_seeds": [r["seed"] for r in ok if not r["solved"]],
            "code_fingerprints": sorted({r["code_fingerprint"] for r in ok if r.get("code_fingerprint")}),
        }
        for key in keys:
            values = [float(r[key]) for r in ok if r.get(key) is not None]
            if values:
                entry[key] = {
                    "mean": statistics.fmean(values),
                    "median": statistics.median(values),
                    "min": min(values),
                    "max": max(values),
                }
        summary[impl] = entry
    return summary


def ratios(summary: dict[str, Any], subject: str = "meeple") -> dict[str, Any]:
    """``subject / baseline`` for each baseline and ratio metric, on means and on medians."""
    out: dict[str, Any] = {}
    if subject not in summary:
        return out
    for baseline in (name for name in summary if name != subject):
        entry = {}
        for name, key in RATIOS:
            a, b = summary[subject].get(key), summary[baseline].get(key)
            if a and b and b["mean"] > 0 and b["median"] > 0:
                entry[name] = {"mean": a["mean"] / b["mean"], "median": a["median"] / b["median"]}
        out[f"{subject}/{baseline}"] = entry
    return out


def machine_info() -> dict[str, Any]:
    import gymnasium
    import lightning
    import tensordict
    import torch
    import torchrl

    cpu_model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable,
        "cpu_model": cpu_model,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torchrl": torchrl.__version__,
        "tensordict": tensordict.__version__,
        "lightning": lightning.__version__,
        "gymnasium": gymnasium.__version__,
        "torch_threads_per_run": 1,
    }


# -- report ----------------------------------------------------------------------------


def render(summary: dict[str, Any], ratio_table: dict[str, Any], hparams: dict[str, Any]) -> None:
    """Two rich tables: metrics per implementation, then meeple / baseline ratios."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    impls = list(summary)
    table = Table(
        title=f"PPO {hparams.get('env_id')} to greedy return {hparams.get('stop_return')}",
        caption="mean / median over seeds",
    )
    table.add_column("metric")
    for impl in impls:
        table.add_column(impl, justify="right")
    solved = []
    for impl in impls:
        entry = summary[impl]
        cell = f"{entry['solved']}/{entry['runs'] - entry['errors']}"
        solved.append(cell + (f" ({entry['errors']} failed)" if entry["errors"] else ""))
    table.add_row("solved", *solved)
    for key, title, fmt in METRICS:
        scale = 1e6 if key == "sec_per_frame" else 1.0
        cells = []
        for impl in impls:
            stats = summary[impl].get(key)
            cells.append("-" if stats is None else
                         f"{fmt.format(stats['mean'] * scale)} / {fmt.format(stats['median'] * scale)}")
        table.add_row(title, *cells)
    console.print(table)

    if ratio_table:
        pairs = list(ratio_table)
        rt = Table(title="meeple / baseline (> 1: meeple slower)", caption="ratio of means / ratio of medians")
        rt.add_column("ratio")
        for pair in pairs:
            rt.add_column(pair, justify="right")
        for name, _ in RATIOS:
            rt.add_row(
                name.replace("_", " "),
                *(f"{ratio_table[p][name]['mean']:.2f} / {ratio_table[p][name]['median']:.2f}"
                  if name in ratio_table[p] else "-" for p in pairs),
            )
        console.print(rt)
    for impl, entry in summary.items():
        if entry["unsolved_seeds"]:
            console.print(f"[yellow]{impl}: not solved within total_frames for seeds {entry['unsolved_seeds']}"
                          " (its time is the whole run: a lower bound)[/yellow]")
        if len(entry["code_fingerprints"]) > 1:
            console.print(f"[red]{impl}: the meeple tree changed between runs (code fingerprints "
                          f"{entry['code_fingerprints']}); its seeds measured different code[/red]")
        if entry["errors"]:
            console.print(f"[red]{impl}: {entry['errors']} run(s) failed; see the JSON file for log tails[/red]")


# -- entry point -----------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    from meeple.bench.common import PPOHparams
    from meeple.config.compose import compose_config

    hp = PPOHparams.from_config(compose_config(args.overrides))  # fail fast on a bad config
    payload: dict[str, Any] = {
        "benchmark": "ppo",
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "git": git_state(),
        "command": ["python", "-m", "meeple.bench", "ppo", *(argv if argv is not None else sys.argv[1:])],
        "machine": machine_info(),
        "hparams": {**hp.to_dict(), "frames_per_batch": hp.frames_per_batch, "num_rollouts": hp.num_rollouts},
        "overrides": args.overrides,
        "seeds": args.seeds,
        "impls": args.impls,
        "timing_definitions": {
            "time_to_solve_s": "from just before the first rollout to the end of the first evaluation "
            "with mean greedy return >= stop_return (whole loop if never solved)",
            "collect_fps": "frames / time in env stepping + policy inference",
            "update_fps": "frames / (time_to_solve - collection - evaluation): advantages, SGD, "
            "lr schedule, framework bookkeeping and logging",
            "overall_fps": "frames / time_to_solve",
            "cpu_time_to_solve_s": "the worker's CPU time (all threads) over the time_to_solve span",
            "loadavg_1min_*": "machine 1-minute load average around the run (the machine may be shared)",
            "process_s": "whole worker process wall time (interpreter start, imports, setup, teardown)",
        },
        "runs": [],
    }
    print(f"PPO benchmark: {', '.join(args.impls)} x seeds {args.seeds}; "
          f"{hp.env_id}, {hp.num_envs} envs x {hp.rollout_steps} steps, up to {hp.total_frames:,} frames; "
          f"results -> {args.out}", flush=True)
    with tempfile.TemporaryDirectory(prefix="meeple-bench-ppo-") as tmp:
        for seed in args.seeds:
            for impl in args.impls:
                result = with_derived(run_one(impl, seed, args.overrides, Path(tmp), args.timeout))
                payload["runs"].append(result)
                if "error" in result:
                    print(f"  {impl:8s} seed {seed}: FAILED ({result['error']})", flush=True)
                    print("    " + "\n    ".join(result["log_tail"]), flush=True)
                else:
                    status = "solved" if result["solved"] else "NOT solved"
                    print(f"  {impl:8s} seed {seed}: {status} in {result['time_to_solve_s']:.1f} s, "
                          f"{result['frames_to_solve']:,} frames (process {result['process_s']:.1f} s, "
                          f"load {result['loadavg_1min_before']:.1f}->{result['loadavg_1min_after']:.1f})", flush=True)
                payload["summary"] = summarize(payload["runs"], args.impls)
                payload["ratios"] = ratios(payload["summary"])
                write_json_atomic(args.out, payload)
    payload["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    write_json_atomic(args.out, payload)
    render(payload["summary"], payload["ratios"], payload["hparams"])
    failed = sum(entry["errors"] for entry in payload["summary"].values())
    return 1 if failed else 0
