"""The trial loop of a sweep: ask Optuna, launch the trials through Hydra, tell the outcome.

Independent of Hydra's plugin machinery: :class:`SweepRunner` gets a ``launch`` function
(Hydra's launcher in the plugin, a fake in tests) that runs a batch of override lists and
returns one ``JobReturn`` each.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import tempfile
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
import yaml
from hydra.core.utils import JobReturn, JobStatus
from optuna.trial import TrialState

from meeple.errors import ConfigError, MeepleError
from meeple.sweep.factories import make_pruner, make_sampler, make_storage, redact_url
from meeple.sweep.plots import save_study_plots
from meeple.sweep.pruning import register_trial, unregister_trial
from meeple.sweep.space import SearchSpace, format_value
from meeple.sweep.tracking import SweepTracking

log = logging.getLogger(__name__)

WORKER = f"{socket.gethostname()}:{os.getpid()}"  # a trial's ``worker`` user attr: host and process

# (override lists of one batch, index of its first job) -> one JobReturn per override list
Launch = Callable[[list[list[str]], int], Sequence[JobReturn]]


@dataclass
class SweepSettings:
    """``hydra.sweeper.*`` (see ``hydra_plugins.meeple_optuna_sweeper.config``)."""

    study_name: str
    storage: str | None = "sqlite:///outputs/optuna.db"
    direction: str = "maximize"
    n_trials: int = 20  # trials this invocation runs (a resumed study adds this many)
    max_trials: int | None = None  # total for the study across resumes and workers (None: no cap)
    n_jobs: int = 1  # trials asked per launcher batch
    sampler: Mapping[str, Any] = field(default_factory=lambda: {"name": "tpe"})
    pruner: Mapping[str, Any] = field(default_factory=lambda: {"name": "median"})
    heartbeat_interval: int | None = 60
    grace_period: int | None = 180
    plots: bool = True
    metric: str = "objective"  # the objective's name, for messages and the parent run


class SweepRunner:
    def __init__(
        self,
        settings: SweepSettings,
        space: SearchSpace,
        launch: Launch,
        *,
        sweep_dir: Path,
        tracking: SweepTracking | None = None,
        command: Sequence[str] = (),
    ) -> None:
        self.settings = settings
        self.space = space
        self.launch = launch
        self.sweep_dir = Path(sweep_dir)
        self.tracking = tracking
        self.command = list(command)  # the user's fixed overrides, to print a ready command
        self.study: optuna.Study | None = None
        # (state, error) of each trial this launch ran, in order
        self.outcomes: list[tuple[TrialState, str | None]] = []

    # ------------------------------------------------------------------------------------------
    def create_study(self) -> optuna.Study:
        s = self.settings
        storage = make_storage(s.storage, heartbeat_interval=s.heartbeat_interval, grace_period=s.grace_period)
        seed = s.sampler.get("seed")
        if seed is not None and storage is not None:
            # A resumed study must not replay the first launch's samples: offset a fixed seed by
            # the trials already stored (still reproducible for a given history).
            seed = int(seed) + _stored_trials(storage, s.study_name)
        sampler = make_sampler(s.sampler.get("name", "tpe"), seed=seed, kwargs=s.sampler.get("kwargs"),
                               space=self.space)
        pruner = make_pruner(s.pruner.get("name", "median"), s.pruner.get("kwargs"))
        if s.direction not in ("maximize", "minimize"):
            raise ConfigError(f"hydra.sweeper.direction={s.direction} is unknown; accepted: maximize, minimize")
        try:
            study = optuna.create_study(study_name=s.study_name, storage=storage, sampler=sampler,
                                        pruner=pruner, direction=s.direction, load_if_exists=True)
        except ValueError as err:  # e.g. an existing study with the other direction
            raise ConfigError(f"study {s.study_name!r} in {redact_url(s.storage)}: {err}") from err
        before = len(study.trials)
        self._check_compatible(study)
        log.info("%s study %r in %s (%d trials so far)", "resuming" if before else "new",
                 study.study_name, redact_url(s.storage), before)
        self.study = study
        return study

    def _check_compatible(self, study: optuna.Study) -> None:
        """A resumed study keeps each parameter's kind (and a categorical its choices)."""
        earlier: dict[str, Any] = {}
        for trial in study.get_trials(deepcopy=False):
            earlier.update(trial.distributions)
        for name, dist in self.space.distributions.items():
            if name in earlier:
                try:
                    optuna.distributions.check_distribution_compatibility(earlier[name], dist)
                except ValueError as err:
                    raise ConfigError(
                        f"{name}: {dist} does not fit study {study.study_name!r}, whose trials used "
                        f"{earlier[name]} ({err}); keep the search space or start a new study with "
                        "hydra.sweeper.study_name=<new name>"
                    ) from err

    def run(self) -> optuna.Study:
        study = self.study or self.create_study()
        if self.tracking is not None:
            self.tracking.start_parent(study, params=self._parent_params(), tags={
                "sweep_dir": str(self.sweep_dir.resolve()), "optuna_storage": redact_url(self.settings.storage)})
        status = "FINISHED"
        try:
            self._loop(study)
            if self.all_failed():
                status = "FAILED"
        except (KeyboardInterrupt, SystemExit):  # Ctrl-C (Lightning turns it into sys.exit(1))
            status = "KILLED"
            raise
        except BaseException:
            status = "FAILED"
            raise
        finally:
            self._finish(study, status)
        return study

    # ------------------------------------------------------------------------------------------
    def _loop(self, study: optuna.Study) -> None:
        s = self.settings
        done, next_job = 0, 0
        while done < s.n_trials:
            batch = min(max(s.n_jobs, 1), s.n_trials - done)
            if s.max_trials is not None:
                left = s.max_trials - len(study.get_trials(deepcopy=False))
                if left <= 0:
                    log.info("study %r has reached max_trials=%d", study.study_name, s.max_trials)
                    return
                batch = min(batch, left)
            if isinstance(study.sampler, optuna.samplers.GridSampler) and study.sampler.is_exhausted(study):
                log.info("grid exhausted: every combination has been tried")
                return
            if s.heartbeat_interval:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    optuna.storages.fail_stale_trials(study)  # trials of a worker that died

            with warnings.catch_warnings():
                # Optuna warns that heartbeats are meant for optimize(); _Heartbeat does its part.
                warnings.filterwarnings("ignore", message="Heartbeat of storage")
                trials = [study.ask(self.space.distributions) for _ in range(batch)]
            overrides = [self._trial_overrides(study, trial) for trial in trials]
            for trial in trials:
                trial.set_user_attr("overrides", self.space.overrides(trial.params))
                trial.set_user_attr("worker", WORKER)  # which of the study's workers ran it
                register_trial(trial)
                log.info("trial %d: %s", trial.number, " ".join(self.space.overrides(trial.params)[len(self.space.fixed):]))
            numbers = [t.number for t in trials]
            consecutive = numbers == list(range(numbers[0], numbers[0] + len(numbers)))
            job_idx = numbers[0] if consecutive and numbers[0] >= next_job else next_job
            heartbeat = _Heartbeat(study, trials)
            try:
                returns = self.launch(overrides, job_idx)
            except BaseException as err:
                # The launcher itself failed or the user pressed Ctrl-C: nothing of this batch ran to
                # an answer. Record it (FAIL, as optuna.optimize does) and stop the sweep.
                reason = "interrupted" if isinstance(err, (KeyboardInterrupt, SystemExit)) else _describe(err)
                for trial in trials:
                    self._tell(study, trial, TrialState.FAIL, error=reason)
                raise
            finally:
                heartbeat.stop()
                for trial in trials:
                    unregister_trial(trial)
            next_job = job_idx + len(trials)
            for trial, ret in zip(trials, returns):
                self._record(study, trial, ret)
            done += batch

    def _trial_overrides(self, study: optuna.Study, trial: optuna.Trial) -> list[str]:
        extra = [f"++trial.study={format_value(study.study_name)}", f"++trial.number={trial.number}"]
        if self.tracking is not None and self.tracking.parent_run_id:
            extra.append(f"++tracking.parent_run_id={self.tracking.parent_run_id}")
        return [*self.space.overrides(trial.params), *extra]

    def _record(self, study: optuna.Study, trial: optuna.Trial, ret: JobReturn) -> None:
        job_dir = _job_dir(ret)
        if job_dir:
            trial.set_user_attr("run_dir", job_dir)
        if ret.status == JobStatus.COMPLETED:
            value = ret.return_value
            try:
                value = float(value)
            except (TypeError, ValueError):
                value = None
            if value is None or not math.isfinite(value):
                error = f"the run returned no finite {self.settings.metric} (got {ret.return_value!r})"
                self._tell(study, trial, TrialState.FAIL, error=error, job_dir=job_dir)
            else:
                self._tell(study, trial, TrialState.COMPLETE, value=value, job_dir=job_dir)
            return
        err = ret._return_value  # JobReturn.return_value re-raises the exception
        if isinstance(err, optuna.TrialPruned):
            self._tell(study, trial, TrialState.PRUNED, job_dir=job_dir)
            return
        error = _describe(err)
        if isinstance(err, MeepleError):
            log.warning("trial %d failed: %s", trial.number, error)
        else:
            log.warning("trial %d failed: %s", trial.number, error, exc_info=err)
        self._tell(study, trial, TrialState.FAIL, error=error, job_dir=job_dir)

    def _tell(self, study: optuna.Study, trial: optuna.Trial, state: TrialState, *, value: float | None = None,
              error: str | None = None, job_dir: str | None = None) -> None:
        if error:
            trial.set_user_attr("error", error)
        try:
            study.tell(trial, value if state == TrialState.COMPLETE else None, state=state)
        except RuntimeError as err:
            # GridSampler calls study.stop() once the grid is covered, which only works inside
            # study.optimize; the trial's state is stored before that, so carry on.
            if "Study.stop" not in str(err):
                raise
        frozen = _frozen(study, trial)
        self.outcomes.append((frozen.state, error))
        shown = f"{frozen.value:.4g}" if frozen.value is not None else "-"
        log.info("trial %d %s: %s=%s", trial.number, frozen.state.name, self.settings.metric, shown)
        if self.tracking is not None:
            try:
                self.tracking.finish_trial(study.study_name, frozen, error=error, job_dir=job_dir)
                if frozen.state == TrialState.COMPLETE:
                    self.tracking.log_trial_value(frozen)
            except Exception as track_err:  # tracking trouble never stops a sweep
                log.warning("MLflow bookkeeping of trial %d failed: %s", trial.number, track_err)

    def all_failed(self) -> str | None:
        """A one-line verdict when every trial of this launch failed (None otherwise): such a
        sweep found nothing and must not look like a success."""
        if not self.outcomes or any(state != TrialState.FAIL for state, _ in self.outcomes):
            return None
        first = next((error for _, error in self.outcomes if error), "no error recorded")
        n = len(self.outcomes)
        return f"all {n} trial{'s' * (n != 1)} of this sweep failed; the first: {first}"

    # ------------------------------------------------------------------------------------------
    def _finish(self, study: optuna.Study, status: str) -> None:
        """Best params (file + printout), plots, and the parent run's summary."""
        trials = study.get_trials(deepcopy=False)
        counts = {state.name.lower(): sum(t.state == state for t in trials)
                  for state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL, TrialState.RUNNING)}
        artifacts: list[Path] = []
        tags: dict[str, str] = {}
        metrics: dict[str, float] = {f"trials_{k}": v for k, v in counts.items()}
        best = _best_trial(study)
        if best is not None:
            path = self.write_best_params(study, best, counts)
            artifacts.append(path)
            metrics["best_value"] = float(best.value)
            tags.update(best_trial=str(best.number), best_params=" ".join(self._best_overrides(best)))
            self._print_best(study, best, path)
        else:
            print(f"\nsweep {study.study_name!r}: no completed trial yet ({counts})", flush=True)
        if self.settings.plots and best is not None:
            artifacts += save_study_plots(study, self.sweep_dir / "plots")
        if self.tracking is not None:
            try:
                self.tracking.finish_parent(status, tags=tags, metrics=metrics, artifacts=artifacts)
            except Exception as err:
                log.warning("MLflow bookkeeping of the sweep failed: %s", err)

    def _best_overrides(self, best: optuna.trial.FrozenTrial) -> list[str]:
        return [f"{self.space.keys.get(k, k)}={format_value(v)}" for k, v in best.params.items()]

    def write_best_params(self, study: optuna.Study, best: optuna.trial.FrozenTrial, counts: Mapping[str, int]) -> Path:
        """``<sweep_dir>/best_params.yaml``: the best trial, its params and a ready command line."""
        overrides = self._best_overrides(best)
        document = {
            "study": study.study_name,
            "storage": redact_url(self.settings.storage),
            "direction": self.settings.direction,
            "metric": self.settings.metric,
            "best_trial": best.number,
            "best_value": float(best.value),
            "params": {self.space.keys.get(k, k): v for k, v in best.params.items()},
            "overrides": overrides,
            "command": " ".join(["python train.py", *self.command, *overrides]),
            "run_dir": best.user_attrs.get("run_dir"),
            "trials": dict(counts),
        }
        if self.tracking is not None:
            document["mlflow_parent_run_id"] = self.tracking.parent_run_id
        path = self.sweep_dir / "best_params.yaml"
        _atomic_write(path, yaml.safe_dump(document, sort_keys=False))
        return path

    def _print_best(self, study: optuna.Study, best: optuna.trial.FrozenTrial, path: Path) -> None:
        lines = [
            "",
            f"best trial of study {study.study_name!r}: #{best.number}  {self.settings.metric} = {best.value:.6g}",
            *[f"  {override}" for override in self._best_overrides(best)],
            f"written to {path}",
            "train with it:  " + " ".join(["python train.py", *self.command, *self._best_overrides(best)]),
        ]
        print("\n".join(lines), flush=True)

    def _parent_params(self) -> dict[str, Any]:
        s = self.settings
        params: dict[str, Any] = {
            "direction": s.direction, "metric": s.metric, "n_trials": s.n_trials, "n_jobs": s.n_jobs,
            "max_trials": s.max_trials, "sampler": dict(s.sampler), "pruner": dict(s.pruner),
            "storage": redact_url(s.storage),
        }
        params.update({f"space/{k}": repr(v) for k, v in self.space.distributions.items()})
        params.update({"fixed": " ".join(self.space.fixed)})
        return params


class _Heartbeat:
    """Records a heartbeat for running trials (RDB storage with ``heartbeat_interval``) so that
    another worker can fail them if this process dies. Optuna only does this inside optimize()."""

    def __init__(self, study: optuna.Study, trials: Sequence[optuna.Trial]) -> None:
        storage = study._storage  # the storage the study was built with (Optuna keeps no public handle)
        interval = storage.get_heartbeat_interval() if hasattr(storage, "get_heartbeat_interval") else None
        self._stop = threading.Event()
        self._thread = None
        if interval:
            ids = [t._trial_id for t in trials]
            self._thread = threading.Thread(target=self._beat, args=(storage, ids, interval), daemon=True,
                                            name="optuna-heartbeat")
            self._thread.start()

    def _beat(self, storage: Any, ids: list[int], interval: int) -> None:
        while True:
            for trial_id in ids:
                try:
                    storage.record_heartbeat(trial_id)
                except Exception:
                    pass
            if self._stop.wait(interval):
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


def _stored_trials(storage: optuna.storages.BaseStorage, study_name: str) -> int:
    try:
        study_id = storage.get_study_id_from_name(study_name)
    except KeyError:
        return 0
    return len(storage.get_all_trials(study_id, deepcopy=False))


def _describe(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}"


def _job_dir(ret: JobReturn) -> str | None:
    try:
        return str(ret.hydra_cfg.hydra.runtime.output_dir)
    except Exception:
        return None


def _best_trial(study: optuna.Study) -> optuna.trial.FrozenTrial | None:
    try:
        return study.best_trial
    except ValueError:  # no completed trial
        return None


def _frozen(study: optuna.Study, trial: optuna.Trial) -> optuna.trial.FrozenTrial:
    return study._storage.get_trial(trial._trial_id)  # one row, not the whole study


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
