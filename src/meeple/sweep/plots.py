"""Study plots: optimisation history, parallel coordinates, parameter importances
(and intermediate values when trials reported any), as HTML (plotly) and PNG (matplotlib)."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import optuna

log = logging.getLogger(__name__)

PLOTS = ("optimization_history", "parallel_coordinate", "param_importances", "intermediate_values")


def save_study_plots(study: optuna.Study, out_dir: Path, *, html: bool = True, png: bool = True) -> list[Path]:
    """Write each plot that the study's trials support; return the files written.

    A plot that cannot be drawn (too few finished trials, a single parameter value, plotly or
    matplotlib missing) is skipped with one log line: plots never fail a sweep.
    HTML files load plotly.js from its CDN (a few KB each instead of ~4 MB).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    finished = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    if not finished:
        log.info("no completed trial: no study plots")
        return []
    written: list[Path] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # optuna's ExperimentalWarning for matplotlib plots
        for name in PLOTS:
            if name == "intermediate_values" and not any(t.intermediate_values for t in study.trials):
                continue
            if name == "param_importances" and (len(finished) < 2 or not study.best_trial.params):
                continue
            if name == "parallel_coordinate" and not study.best_trial.params:
                continue
            if html:
                written += _try(_html, study, name, out_dir / f"{name}.html")
            if png:
                written += _try(_png, study, name, out_dir / f"{name}.png")
    return written


def _try(draw, study: optuna.Study, name: str, path: Path) -> list[Path]:
    try:
        return [draw(study, name, path)]
    except Exception as err:
        log.info("study plot %s skipped: %s", path.name, err)
        return []


def _html(study: optuna.Study, name: str, path: Path) -> Path:
    figure = getattr(optuna.visualization, f"plot_{name}")(study)
    figure.write_html(str(path), include_plotlyjs="cdn")
    return path


def _png(study: optuna.Study, name: str, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")  # the sweeper is a CLI: never open a window
    import matplotlib.pyplot as plt

    axes = getattr(optuna.visualization.matplotlib, f"plot_{name}")(study)
    figure = axes.figure if hasattr(axes, "figure") else axes.flat[0].figure
    figure.set_size_inches(9, 5)
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)
    return path
