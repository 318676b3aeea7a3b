"""Pruning: the training run reports its intermediate objective to its Optuna trial.

The sweeper asks Optuna for a trial, registers it here under ``(study, number)`` and passes
``++trial.study=<name> ++trial.number=<n>`` to the run; the run's :class:`OptunaPruning`
callback (added by ``conf/hparams_search/*.yaml``) finds the trial here, reports
``eval/episode_return`` after every greedy evaluation, and raises ``optuna.TrialPruned``
when the study's pruner says so. The sweeper then tells Optuna the trial was PRUNED.

Trials run in the sweeper's process (Hydra's basic launcher). A run without a registered
trial (a plain ``python train.py hparams_search=...`` run, or a launcher that runs jobs in
other processes) trains to the end without pruning.
"""

from __future__ import annotations

import logging
import math
import threading

import lightning as L
import optuna

from meeple.tracking.keys import EVAL_RETURN

log = logging.getLogger(__name__)

_ACTIVE: dict[tuple[str, int], optuna.Trial] = {}
_LOCK = threading.Lock()


def register_trial(trial: optuna.Trial) -> None:
    with _LOCK:
        _ACTIVE[(trial.study.study_name, trial.number)] = trial


def unregister_trial(trial: optuna.Trial) -> None:
    with _LOCK:
        _ACTIVE.pop((trial.study.study_name, trial.number), None)


def active_trial(study: str | None, number: int | None) -> optuna.Trial | None:
    if study is None or number is None:
        return None
    with _LOCK:
        return _ACTIVE.get((str(study), int(number)))


def report_and_maybe_prune(trial: optuna.Trial, value: float, step: int) -> None:
    """``trial.report(value, step)``; raise ``TrialPruned`` if the pruner says stop."""
    if value is None or not math.isfinite(value):
        return
    trial.report(float(value), int(step))
    if trial.should_prune():
        raise optuna.TrialPruned(f"trial {trial.number} pruned at step {step} with {value:.4g}")


class OptunaPruning(L.Callback):
    """Reports ``monitor`` to the run's trial at each evaluation (step = frames trained).

    For ``eval/episode_return`` the values come from the evaluation callback's ``history``
    (one report per evaluation); any other metric is read from ``trainer.callback_metrics``
    once per rollout. Costs nothing per training step.
    """

    def __init__(self, monitor: str = EVAL_RETURN, study: str | None = None, trial_number: int | None = None) -> None:
        self.monitor = monitor
        self.study = study
        self.trial_number = trial_number
        self._trial: optuna.Trial | None = None
        self._reported = 0

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._trial = active_trial(self.study, self.trial_number)
        if self._trial is None and self.trial_number is not None:
            log.warning("no Optuna trial %s/%s in this process: pruning is off for this run",
                        self.study, self.trial_number)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._trial is None:
            return
        history = _evaluation_history(trainer) if self.monitor == EVAL_RETURN else None
        if history is not None:
            new, self._reported = history[self._reported:], len(history)
            for frames, value in new:
                report_and_maybe_prune(self._trial, value, frames)
            return
        value = trainer.callback_metrics.get(self.monitor)
        if value is not None:
            step = int(getattr(trainer.datamodule, "frames", 0) or trainer.current_epoch + 1)
            report_and_maybe_prune(self._trial, float(value), step)


def _evaluation_history(trainer: L.Trainer) -> list[tuple[int, float]] | None:
    for callback in trainer.callbacks:
        history = getattr(callback, "history", None)
        if isinstance(history, list):
            return history
    return None
