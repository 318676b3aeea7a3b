"""Learning-curve pictures in MLflow: return over frames, drawn once at the end of a run."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Sequence
from pathlib import Path

import lightning as L
from lightning.pytorch.loggers import MLFlowLogger

from meeple.tracking.keys import EVAL_RETURN, TRAIN_RETURN

log = logging.getLogger(__name__)


class LearningCurves(L.Callback):
    """At the end of a run (finished, stopped, pruned or failed), plots each metric in
    ``keys`` over ``x`` (frames trained) from the run's MLflow metric history and logs the
    PNG as ``<artifact_path>/<filename>`` of the run. Nothing happens during training.

    Curves come from the MLflow run (every logged point); a metric never logged is left
    out, and the greedy evaluation's own ``history`` stands in when MLflow is off-line.
    """

    def __init__(
        self,
        keys: Sequence[str] = (EVAL_RETURN, TRAIN_RETURN),
        x: str = "train/frames",
        filename: str = "learning_curves.png",
        artifact_path: str = "plots",
        y_label: str = "return",
    ) -> None:
        self.keys = list(keys)
        self.x = x
        self.filename = filename
        self.artifact_path = artifact_path
        self.y_label = y_label
        self.logged_to: str | None = None  # run id the picture went to (tests, notebooks)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._plot(trainer)  # after the last rollout's metrics are logged, before the run closes

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        self._plot(trainer)  # a pruned or failed run still shows how far it got

    def _plot(self, trainer: L.Trainer) -> None:
        if self.logged_to is not None or trainer.global_rank != 0:
            return
        logger = next((lg for lg in trainer.loggers if isinstance(lg, MLFlowLogger)), None)
        if logger is None or logger.run_id is None:
            return
        try:
            curves = self.curves(logger.experiment, logger.run_id, trainer)
            if not curves:
                return
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / self.filename
                draw_learning_curves(curves, path, x_label=self.x, y_label=self.y_label, title=logger.experiment.get_run(logger.run_id).info.run_name)
                logger.experiment.log_artifact(logger.run_id, str(path), self.artifact_path)
            self.logged_to = logger.run_id
        except Exception as err:  # a picture must never fail a run
            log.warning("learning-curve plot skipped: %s", err)

    def curves(self, client, run_id: str, trainer: L.Trainer | None = None) -> dict[str, list[tuple[float, float]]]:
        """``{metric: [(x, value), ...]}`` from the run's metric history (joined on step)."""
        x_at_step = {m.step: m.value for m in client.get_metric_history(run_id, self.x)}
        curves: dict[str, list[tuple[float, float]]] = {}
        for key in self.keys:
            points = [(x_at_step.get(m.step, float(m.step)), m.value) for m in client.get_metric_history(run_id, key)]
            if points:
                curves[key] = sorted(points)
        if EVAL_RETURN in self.keys and EVAL_RETURN not in curves and trainer is not None:
            for callback in trainer.callbacks:
                history = getattr(callback, "history", None)
                # the greedy evaluation's (frames, mean return) pairs; other callbacks' histories differ
                if isinstance(history, list) and history and all(
                    isinstance(p, tuple | list) and len(p) == 2 for p in history
                ):
                    curves[EVAL_RETURN] = [(float(f), float(v)) for f, v in history]
                    break
        return curves


def draw_learning_curves(curves: dict[str, list[tuple[float, float]]], path: Path, *, x_label: str,
                         y_label: str = "return", title: str | None = None) -> Path:
    """One line per metric over ``x_label``; written as PNG to ``path``."""
    from matplotlib.figure import Figure  # no pyplot: no GUI backend, no global state

    figure = Figure(figsize=(7, 4), dpi=110, layout="constrained")
    axes = figure.subplots()
    for key, points in curves.items():
        xs, ys = zip(*points)
        style = "o-" if len(points) < 30 else "-"
        axes.plot(xs, ys, style, markersize=3, label=key)
    axes.set_xlabel(x_label)
    axes.set_ylabel(y_label)
    axes.grid(alpha=0.3)
    axes.legend(loc="best")
    if title:
        axes.set_title(title, fontsize=10)
    figure.savefig(path)
    return path
