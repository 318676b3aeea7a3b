"""Every recipe's final metrics at a fixed seed, recorded and compared between two checkouts.

    python tools/compare_metrics.py run OUT.json [EXPERIMENT ...]
    python tools/compare_metrics.py compare BEFORE.json AFTER.json

``run`` trains each recipe Hydra finds (as ``tools/compose_snapshot.py`` lists them; or the
ones named) at ``debug=tiny`` with ``seed=1``, no tracking, one torch thread and its outputs in
one temporary folder, each in its own process, one after the other, and writes the final
metrics each returns (``meeple.cli.train.train``: the last stage's) to OUT.json. A recipe that
starts from another run's gate (``pipeline.start``) finds it in that folder: recipes that fail
are run again once after the others. The code measured is the ``meeple`` on ``PYTHONPATH``, so
pointing it at an older checkout records that checkout's metrics.

``compare`` prints one row per metric: equal, different (with the absolute difference) or only
on one side; the run's wall-clock metrics (throughput, durations) are listed apart, as they
differ on every run.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SEED = 1
OVERRIDES = ["debug=tiny", f"seed={SEED}", "tracking=none", "hardware.torch_threads=1", "++callbacks.progress=null"]
# Wall-clock metrics (throughput, waits, durations): they differ on every run.
TIMING = re.compile(r"time|fps|per_s|per_h|_s$|/s$|_us$|sps|seconds|throughput|duration|speed|elapsed|latency|idle"
                    r"|memory|rss", re.I)
MARK = "compare_metrics: "


def train_one(experiment: str, output_root: str) -> dict[str, float]:
    """Train ``experiment`` in this process and return its final metrics."""
    from meeple.cli.train import train
    from meeple.config.compose import compose_config

    cfg = compose_config([f"+experiment={experiment}", *OVERRIDES, f"paths.output_root={output_root}"])
    return {key: float(value) for key, value in train(cfg).items()}


def run_one(experiment: str, output_root: str) -> dict:
    """``experiment`` in a fresh process: its metrics, or the last lines of its error."""
    start = time.monotonic()
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "_one", experiment, output_root], capture_output=True,
                          text=True, cwd=output_root, env={**os.environ, "OMP_NUM_THREADS": "1"})
    seconds = round(time.monotonic() - start, 1)
    for line in done.stdout.splitlines():
        if line.startswith(MARK):
            return {"metrics": json.loads(line[len(MARK):]), "seconds": seconds}
    return {"error": "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:]), "seconds": seconds}


def recipes() -> list[str]:
    """Every recipe Hydra finds; a checkout older than ``group_options`` kept them in ``conf/experiment``."""
    from meeple.config import compose

    if hasattr(compose, "group_options"):
        return compose.group_options("experiment")
    return sorted(path.stem for path in (compose.conf_dir() / "experiment").glob("*.yaml"))


def record(out: Path, experiments: list[str]) -> None:
    experiments = experiments or recipes()
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="compare_metrics_") as root:
        for attempt in (1, 2):
            for name in experiments:
                if attempt == 2 and "error" not in results[name]:
                    continue
                results[name] = run_one(name, root)
                outcome = "error" if "error" in results[name] else f"{len(results[name]['metrics'])} metrics"
                print(f"{name} (attempt {attempt}): {outcome} in {results[name]['seconds']} s", flush=True)
                out.write_text(json.dumps({"overrides": OVERRIDES, "results": results}, indent=1, sort_keys=True))


def compare(before_path: Path, after_path: Path) -> int:
    """Print the table; the exit status is 1 when a metric other than a timing differs."""
    before, after = (json.loads(Path(p).read_text())["results"] for p in (before_path, after_path))
    differs = 0
    print("| experiment | metrics equal | different (max abs diff) | timing (not compared) | note |")
    print("|---|---|---|---|---|")
    for name in sorted(set(before) | set(after)):
        a, b = before.get(name, {}), after.get(name, {})
        if "metrics" not in a or "metrics" not in b:
            note = "; ".join(f"{side}: {r.get('error', 'not run').splitlines()[-1] if r.get('error') else 'not run'}"
                             for side, r in (("before", a), ("after", b)) if "metrics" not in r)
            print(f"| {name} | - | - | - | {note} |")
            continue
        ma, mb = a["metrics"], b["metrics"]
        keys = sorted(set(ma) | set(mb))
        timing = [k for k in keys if TIMING.search(k)]
        equal, different, one_side = [], [], []
        for key in keys:
            if key in timing:
                continue
            if key not in ma or key not in mb:
                one_side.append(key)
            elif ma[key] == mb[key] or (math.isnan(ma[key]) and math.isnan(mb[key])):
                equal.append(key)
            else:
                different.append((key, abs(ma[key] - mb[key])))
        differs += len(different) + len(one_side)
        worst = max(different, key=lambda item: item[1]) if different else None
        cell = f"{len(different)}" + (f" ({worst[0]}: {worst[1]:.3g})" if worst else "")
        note = f"only on one side: {', '.join(one_side)}" if one_side else ""
        print(f"| {name} | {len(equal)} | {cell} | {len(timing)} | {note} |")
        for key, diff in different:
            print(f"|   {key} | | {ma[key]!r} -> {mb[key]!r} (|diff| {diff:.3g}) | | |")
    return 1 if differs else 0


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "run":
        record(Path(argv[1]), argv[2:])
        return 0
    if len(argv) == 3 and argv[0] == "compare":
        return compare(Path(argv[1]), Path(argv[2]))
    if len(argv) == 3 and argv[0] == "_one":  # the child process of `run`
        print(MARK + json.dumps(train_one(argv[1], argv[2])), flush=True)
        return 0
    sys.exit("usage: python tools/compare_metrics.py run OUT.json [EXPERIMENT ...] | compare BEFORE.json AFTER.json")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
