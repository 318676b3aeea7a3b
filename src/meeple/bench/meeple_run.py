"""meeple's own PPO run, instrumented with the benchmark's clock.

Runs ``meeple.cli.train.run`` on the composed default config exactly as
``python train.py`` would, plus one extra callback (:class:`BenchTimer`, added
through ``callbacks``, the config's bag of callbacks) that starts the clock at
``on_train_start`` (after the collector and envs are built), times each
collector ``next()`` and each greedy evaluation, and reads the solve point off
meeple's own ``GreedyEvaluation`` callback.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import lightning as L

from meeple.bench.common import PPOHparams, RunClock
from meeple.callbacks.evaluation import GreedyEvaluation
from meeple.config.compose import compose_config

TIMER_TARGET = "meeple.bench.meeple_run.BenchTimer"


class BenchTimer(L.Callback):
    """Benchmark clock for a meeple run (the last instance built is the one used)."""

    instances: ClassVar[list[BenchTimer]] = []

    def __init__(self) -> None:
        self.clock: RunClock | None = None
        self._evaluation: GreedyEvaluation | None = None
        BenchTimer.instances.append(self)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        evaluations = [cb for cb in trainer.callbacks if isinstance(cb, GreedyEvaluation)]
        if not evaluations:
            raise RuntimeError("the benchmark needs meeple's GreedyEvaluation callback (phase.callbacks.eval)")
        evaluation = self._evaluation = evaluations[0]
        self.clock = clock = RunClock(evaluation.stop_at_return)

        # Time each greedy evaluation (instance attribute: this run only).
        evaluate = evaluation.evaluate

        def timed_evaluate(*args: Any, **kwargs: Any) -> float:
            start = time.perf_counter()
            mean_return = evaluate(*args, **kwargs)
            clock.add_eval(time.perf_counter() - start, mean_return)
            return mean_return

        evaluation.evaluate = timed_evaluate

        # Time each rollout's collection: the datamodule's ``next()`` on the collector.
        dm = trainer.datamodule
        if getattr(dm, "frames", 0):
            raise RuntimeError("a rollout was collected before on_train_start; the clock would miss it")
        dm.start()  # the collector is built lazily; build it now, outside the clock
        if getattr(dm, "_batches", None) is None:
            raise RuntimeError("RolloutDataModule no longer exposes _batches; update meeple.bench.meeple_run")
        dm._batches = _timed(dm._batches, clock)
        clock.start()

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.clock is not None:
            self.clock.finish()


def _timed(batches: Iterator, clock: RunClock) -> Iterator:
    while True:
        start = time.perf_counter()
        try:
            batch = next(batches)
        except StopIteration:
            return
        clock.add_collect(time.perf_counter() - start, batch.numel())
        yield batch


def meeple_overrides(seed: int, tracking_dir: str, overrides: Sequence[str] = ()) -> list[str]:
    """The default run, tracked to a throwaway sqlite db, quiet, with the benchmark clock."""
    return [
        f"seed={seed}",
        f"tracking.uri=sqlite:///{Path(tracking_dir).resolve() / 'mlflow.db'}",
        "callbacks.progress=null",
        f"+callbacks.bench_timer._target_={TIMER_TARGET}",
        *overrides,
    ]


def train(overrides: Sequence[str], seed: int, *, tracking_dir: str | None = None) -> dict[str, Any]:
    """``meeple.cli.train.run`` on the composed default config (plus ``overrides``)."""
    from meeple.cli.train import run

    with tempfile.TemporaryDirectory(prefix="meeple-bench-") as tmp:
        cfg = compose_config(meeple_overrides(seed, tracking_dir or tmp, overrides))
        PPOHparams.from_config(cfg)  # same checks as the baselines get
        BenchTimer.instances.clear()
        # MLflow's sqlite store puts artifacts under ./mlruns: keep them in the temp dir.
        with contextlib.chdir(tracking_dir or tmp):
            run(cfg)
    if not BenchTimer.instances or BenchTimer.instances[-1].clock is None:
        raise RuntimeError("the benchmark clock never started (BenchTimer callback not installed?)")
    return BenchTimer.instances[-1].clock.result()
