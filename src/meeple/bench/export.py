"""Exported-policy latency: onnxruntime against eager torch, per decision, on CPU.

    python -m meeple.bench export [--checkpoint RUN_OR_PT ...] [--out export.json]

Each policy is exported as ``python -m meeple.export`` does (``torch.onnx.export``, dynamo) and
both runtimes compute the same masked logits and value (``meeple.export.ExportedPolicy``):
eager torch under ``inference_mode``, onnxruntime on the exported file. One thread each
(``torch.set_num_threads(1)``; onnxruntime intra- and inter-op threads 1), so the numbers are
per core and a shared machine disturbs them least. Batches 1 and 64: one call per batch;
per-decision latency = call time / batch. Reported: the median over ``--repeats`` timed blocks
of ``--calls`` calls (after a warm-up), and ratio = torch / onnxruntime (> 1: onnxruntime is
faster).

Without ``--checkpoint``: freshly initialised networks of the default configs, a tile-game-sized
``planes_resnet`` (84 x 34 planes, 155 masked actions; conf/model/planes_resnet.yaml) and the
default env's ``mlp`` (4 inputs, 2 actions; conf/model/mlp.yaml), with random inputs; latency does
not depend on the weights' values.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from meeple.config.compose import conf_dir
from meeple.errors import MeepleError
from meeple.jsonio import write_json_atomic
from meeple.provenance import git_state

BATCHES = (1, 64)


def _synthetic(name: str, model_file: str, obs_shape: tuple[int, ...], n_actions: int, masked: bool):
    """A LoadedPolicy of a fresh network built from ``conf/model/<model_file>`` on these specs."""
    from torchrl.data import Binary, Categorical, Composite, Unbounded

    from meeple.export.policy import ExportedPolicy, LoadedPolicy, TensorDictHeads

    specs = {"observation": Unbounded(shape=(1, *obs_shape), dtype=torch.float32)}
    if masked:
        specs["action_mask"] = Binary(n=n_actions, shape=(1, n_actions), dtype=torch.bool)
    model = OmegaConf.load(Path(conf_dir()) / "model" / model_file)
    torch.manual_seed(0)
    actor, critic = instantiate(model)(Composite(specs, shape=(1,)), Categorical(n_actions, shape=(1,)))
    policy = ExportedPolicy(TensorDictHeads(actor, critic), has_mask=masked).eval()
    return LoadedPolicy(policy, Path(f"<fresh {name}>"), str(model._target_), None, {"name": name},
                        obs_shape, torch.float32, n_actions)  # fmt: skip


def policies(checkpoints: list[str]) -> list[tuple[str, Any]]:
    from meeple.export.policy import load_policy

    if checkpoints:
        return [(Path(c).name, load_policy(c)) for c in checkpoints]
    return [
        ("planes_resnet 84x34", _synthetic("planes", "planes_resnet.yaml", (84, 34), 155, True)),
        ("mlp 4", _synthetic("vector", "mlp.yaml", (4,), 2, False)),
    ]


def _per_call(fn, calls: int, repeats: int, warmup: int) -> float:
    for _ in range(warmup):
        fn()
    blocks = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        blocks.append((time.perf_counter() - start) / calls)
    return statistics.median(blocks)


def measure(name: str, loaded, args: argparse.Namespace, folder: Path) -> list[dict[str, Any]]:
    from meeple.export.onnx import check_parity, export_onnx, feeds, session
    from meeple.export.policy import random_samples

    path = folder / f"{len(os.listdir(folder))}.onnx"
    export_onnx(loaded, path)
    parity = check_parity(loaded, path, random_samples(loaded, max(BATCHES), seed=1), BATCHES)
    sess = session(path, threads=1)
    policy = loaded.policy
    rows = []
    for batch in BATCHES:
        s = random_samples(loaded, batch, seed=2)
        inputs = (s.observation, s.action_mask) if policy.has_mask else (s.observation,)

        def eager(inputs=inputs):
            with torch.inference_mode():
                policy(*inputs)

        def onnx(s=s):  # computing the caller inputs is the caller's work: timed with it
            sess.run(None, feeds(s.observation, s.action_mask, policy.caller_inputs))

        calls = max(args.calls // batch, 20)
        t_torch = _per_call(eager, calls, args.repeats, args.warmup)
        t_onnx = _per_call(onnx, calls, args.repeats, args.warmup)
        rows.append({
            "policy": name, "model": loaded.model_target, "batch": batch,
            "observation": list(loaded.observation_shape), "actions": loaded.num_actions,
            "torch_us_per_call": t_torch * 1e6, "onnx_us_per_call": t_onnx * 1e6,
            "torch_us_per_decision": t_torch * 1e6 / batch, "onnx_us_per_decision": t_onnx * 1e6 / batch,
            "ratio_torch_over_onnx": t_torch / t_onnx, "parity_max_abs_logits": parity.max_abs_logits,
        })  # fmt: skip
    return rows


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m meeple.bench export", description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint", action="append", default=[],
                   help="a run directory or checkpoint to measure (repeatable); default: fresh networks")  # fmt: skip
    p.add_argument("--out", default=None, help="also write the results as JSON here")
    p.add_argument("--calls", type=int, default=2000, help="decisions per timed block (calls = this / batch)")
    p.add_argument("--repeats", type=int, default=5, help="timed blocks; the median is reported")
    p.add_argument("--warmup", type=int, default=20, help="untimed calls first")
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    """Exported-policy latency: onnxruntime vs eager torch per decision, batch 1 and 64, CPU, 1 thread."""
    args = parse_args(argv)
    from meeple.export.onnx import require_onnx

    torch.set_num_threads(1)
    rows: list[dict[str, Any]] = []
    try:
        require_onnx()
        with tempfile.TemporaryDirectory() as folder:
            for name, loaded in policies(args.checkpoint):
                rows += measure(name, loaded, args, Path(folder))
    except MeepleError as err:
        print(f"meeple.bench export: error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    print("per decision (us), CPU, 1 thread each; ratio = torch / onnxruntime")
    print(f"{'policy':<24} {'batch':>5} {'torch':>10} {'onnxruntime':>12} {'ratio':>6}")
    for r in rows:
        print(f"{r['policy']:<24} {r['batch']:>5} {r['torch_us_per_decision']:>10.1f} "
              f"{r['onnx_us_per_decision']:>12.1f} {r['ratio_torch_over_onnx']:>6.2f}")  # fmt: skip
    if args.out:
        import onnxruntime

        write_json_atomic(args.out, {
            "rows": rows, "threads": 1, "torch": torch.__version__, "onnxruntime": onnxruntime.__version__,
            "cpu": platform.processor() or platform.machine(), "load_average": os.getloadavg(),
            "git": git_state(),
        })  # fmt: skip
    return 0
