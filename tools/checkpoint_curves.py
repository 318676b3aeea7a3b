"""One metric's curve per run, read from the metrics each checkpoint of a stage records (runs
with ``tracking=none`` have no MLflow history; keep every rollout's checkpoint with
``checkpoint.min_interval_s=0 checkpoint.keep=100``), or, given a run directory (its run.json),
from the MLflow history of its last stage:

    python tools/checkpoint_curves.py oracle/dealing_mass F=outputs/runs/<run>/phase1 \\
        G=outputs/runs/<run>/phase1 --smooth 5 --out docs/rl_diagnostics/teacher_dealing_mass.png
    python tools/checkpoint_curves.py guide/agree LG=outputs/runs/<run> --smooth 5 --out guide.png

Prints each run's values in blocks of ``--smooth`` rollouts and draws the moving means as a PNG.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

from meeple.callbacks.learning_curves import LearningCurves, draw_learning_curves


def checkpoint_values(stage: Path, key: str) -> list[tuple[int, float]]:
    """``(rollout, value)`` of ``key`` in every ``ckpt_*.pt`` of ``stage``/checkpoints."""
    points = []
    for path in sorted((stage / "checkpoints").glob("ckpt_*.pt")):
        ck = torch.load(path, map_location="cpu", weights_only=False)
        if key in ck.get("metrics", {}):
            points.append((int(ck["epoch"]) + 1, float(ck["metrics"][key])))
    return sorted(points)


def mlflow_values(run: Path, key: str) -> list[tuple[int, float]]:
    """``(rollout, value)`` of ``key`` in the MLflow history of ``run``'s last stage; the rollout
    is the stage's ``epoch`` metric (+1) logged at the value's step."""
    import json

    from mlflow.tracking import MlflowClient

    info = json.loads((run / "run.json").read_text())
    stages = info.get("stage_mlflow_runs") or {}
    if not stages:
        return []
    client = MlflowClient(info["mlflow_tracking_uri"])
    curve = LearningCurves([key], x="epoch").curves(client, stages[max(stages, key=int)]).get(key, [])
    return [(int(epoch) + 1, value) for epoch, value in curve]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("key", help="a metric the checkpoints record, e.g. oracle/dealing_mass")
    parser.add_argument("runs", nargs="+", help="LABEL=STAGE_DIR (a run's phase<N> folder) or LABEL=RUN_DIR (MLflow)")
    parser.add_argument("--smooth", type=int, default=5, help="rollouts per block / moving mean")
    parser.add_argument("--out", type=Path, help="PNG to write")
    parser.add_argument("--title")
    args = parser.parse_args(argv)
    curves = {}
    for spec in args.runs:
        label, _, folder = spec.partition("=")
        source = Path(folder)
        points = mlflow_values(source, args.key) if (source / "run.json").exists() else checkpoint_values(source, args.key)
        if not points:
            print(f"checkpoint_curves: {folder}: nothing records {args.key!r}", file=sys.stderr)
            return 2
        xs, ys = np.array([p[0] for p in points]), np.array([p[1] for p in points])
        blocks = [f"{ys[i:i + args.smooth].mean():.4f}" for i in range(0, len(ys), args.smooth)]
        print(f"{label}: {args.key} per {args.smooth} rollouts: {' '.join(blocks)}")
        k = min(args.smooth, len(ys))
        mean = np.convolve(ys, np.ones(k) / k, mode="valid")
        curves[label] = list(zip(xs[k - 1 :].tolist(), mean.tolist()))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        draw_learning_curves(curves, args.out, x_label="rollout", y_label=f"{args.key} ({args.smooth}-rollout mean)",
                             title=args.title)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
