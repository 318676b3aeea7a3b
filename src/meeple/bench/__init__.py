"""Benchmarks: ``python -m meeple.bench`` lists them, ``python -m meeple.bench NAME --help`` runs one.

The core's own are in :data:`BENCHMARKS`; a plugin adds its own through the entry-point group
``meeple.benchmarks`` (name -> ``module:main``; the first line of ``main``'s docstring is the
description), so the core never imports a plugin to measure it. Benchmarks are scripts that
print and save timings; tests never assert timings.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from dataclasses import dataclass

Main = Callable[[list[str]], "int | None"]

# name -> (module with ``main(argv)``, one-line description)
BENCHMARKS: dict[str, tuple[str, str]] = {
    "ppo": (
        "meeple.bench.ppo",
        "PPO on the default env to its solve threshold: meeple vs plain TorchRL vs plain PyTorch",
    ),
    "transport": (
        "meeple.bench.transport",
        "env-server round trips: http vs socket vs shm vs in-process (latency percentiles, steps/s, K servers)",
    ),
    "pixels": (
        "meeple.bench.pixels",
        "packed-frame pipeline: env step+render (Warp vs torch), LUT unpack vs copy, diff-LUT reward, "
        "sync vs async PPO",
    ),
    "independent": (
        "meeple.bench.independent",
        "Independent DQN agents: env steps/s and updates/s, multi-process topology vs one sequential loop",
    ),
    "collect": (
        "meeple.bench.collect",
        "collection rate, in-process default vs Ray actors (1, 2, 4): PPO frames/s, AlphaZero positions/s",
    ),
    "export": (
        "meeple.bench.export",
        "exported policies: onnxruntime vs eager torch per decision, batch 1 and 64, CPU, 1 thread",
    ),
}
BENCHMARKS["packed"] = BENCHMARKS["pixels"]  # alias


@dataclass(frozen=True)
class Benchmark:
    name: str
    description: str
    load: Callable[[], Main]  # imports the benchmark's module only when it runs


def check_device(parser: argparse.ArgumentParser, device: str) -> None:
    """A benchmark's ``--device``: a CUDA device where CUDA is missing is a usage error (exit 2)."""
    import torch

    if str(device).startswith("cuda") and not torch.cuda.is_available():
        parser.error(f"--device {device}: CUDA is not available here; accepted: cpu")


def _core(module: str) -> Callable[[], Main]:
    return lambda: importlib.import_module(module).main


def _plugin(name: str, load: Callable[[], Main]) -> Benchmark:
    """A plugin's benchmark; one whose module does not import is listed with the reason."""
    try:
        main = load()
    except ImportError as err:
        return Benchmark(name, f"(does not import: {err})", load)
    doc = (main.__doc__ or "").strip()
    return Benchmark(name, doc.splitlines()[0] if doc else "(no description)", lambda: main)


def benchmarks() -> dict[str, Benchmark]:
    """The core's benchmarks and those of installed plugins (a core name wins a clash)."""
    from meeple.plugins.registry import BENCHMARKS_GROUP, installed

    found = {name: _plugin(name, ep.load) for name, ep in installed(BENCHMARKS_GROUP).items()
             if name not in BENCHMARKS}  # fmt: skip
    found.update({name: Benchmark(name, description, _core(module))
                  for name, (module, description) in BENCHMARKS.items()})  # fmt: skip
    return found
