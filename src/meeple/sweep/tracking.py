"""A sweep in MLflow: one parent run per study, one nested run per trial.

The trial's nested run is the training run itself: the sweeper passes
``++tracking.parent_run_id=<parent>`` and ``++trial.number=<n>`` to the trial, and
:func:`meeple.tracking.mlflow.make_mlflow_logger` tags the run with ``mlflow.parentRunId``
and ``optuna_trial``. After the trial the sweeper tags it ``trial_state`` (COMPLETE, PRUNED,
FAIL) and marks pruned runs KILLED. A trial that failed before its run existed still gets a
nested run (params, state, error) so every trial shows up under the parent.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import optuna
from mlflow import MlflowClient
from mlflow.entities import Param, RunStatus

from meeple.tracking.mlflow import (
    PARENT_RUN_TAG,
    environment_tags,
    get_or_create_experiment,
    store_uri,
)

log = logging.getLogger(__name__)

PARENT_ATTR = "mlflow_parent_run_id"  # study user attr: the parent run a resumed sweep reuses
STATE_TAG = "trial_state"
MAX_TAG = 5000  # MLflow tag values are limited in length


class SweepTracking:
    """MLflow bookkeeping of one sweep (``uri``/``experiment`` as the training runs use)."""

    def __init__(self, uri: str, experiment: str, artifact_location: str | None = None) -> None:
        uri = store_uri(uri)
        self.uri = uri
        self.client = MlflowClient(tracking_uri=uri)
        self.experiment_id = get_or_create_experiment(self.client, experiment, artifact_location)
        self.parent_run_id: str | None = None

    # -- parent run --------------------------------------------------------------------------
    def start_parent(self, study: optuna.Study, *, params: Mapping[str, Any], tags: Mapping[str, str]) -> str:
        """The sweep's parent run: the study's earlier one when resuming, else a new one."""
        previous = study.user_attrs.get(PARENT_ATTR)
        if previous:
            try:
                run = self.client.get_run(previous)
                if run.info.experiment_id == self.experiment_id and run.info.lifecycle_stage != "deleted":
                    self.client.update_run(previous, status="RUNNING")
                    self.client.set_tag(previous, "resumed", "true")
                    self.parent_run_id = previous
                    return previous
            except Exception:  # another tracking server, or the run was purged: start anew
                pass
        run = self.client.create_run(
            self.experiment_id,
            run_name=f"sweep-{study.study_name}",
            tags={**environment_tags(), **tags, "optuna_study": study.study_name, "sweep": "true"},
        )
        # Workers started at the same moment each found no parent and made one: the oldest wins
        # (the study attr has no compare-and-set), the others delete theirs and join it.
        parent = self._oldest_parent(study.study_name) or run.info.run_id
        if parent != run.info.run_id:
            self.client.delete_run(run.info.run_id)
            log.info("sweep: joining parent run %s of another worker", parent)
        else:
            self.client.log_batch(parent, params=[Param(k, str(v)[:6000]) for k, v in params.items()])
        self.parent_run_id = parent
        study.set_user_attr(PARENT_ATTR, parent)
        return parent

    def _oldest_parent(self, study_name: str) -> str | None:
        quoted = study_name.replace("'", "\\'")
        runs = self.client.search_runs([self.experiment_id],
                                       filter_string=f"tags.sweep = 'true' and tags.optuna_study = '{quoted}' "
                                                     "and attributes.status = 'RUNNING'")
        runs = sorted(runs, key=lambda r: (r.info.start_time, r.info.run_id))
        return runs[0].info.run_id if runs else None

    def finish_parent(self, status: str, *, tags: Mapping[str, str] | None = None,
                      metrics: Mapping[str, float] | None = None, artifacts: Sequence[Path] = ()) -> None:
        if self.parent_run_id is None:
            return
        run_id = self.parent_run_id
        for key, value in (tags or {}).items():
            self.client.set_tag(run_id, key, str(value)[:MAX_TAG])
        for key, value in (metrics or {}).items():
            self.client.log_metric(run_id, key, float(value))
        for path in artifacts:
            sub = "plots" if path.parent.name == "plots" else None
            self.client.log_artifact(run_id, str(path), sub)
        self.client.set_terminated(run_id, status)

    def log_trial_value(self, trial: optuna.trial.FrozenTrial) -> None:
        """One point per finished trial on the parent: its objective at step = trial number."""
        if self.parent_run_id is not None and trial.value is not None:
            self.client.log_metric(self.parent_run_id, "trial_value", float(trial.value), step=trial.number)

    # -- trial runs --------------------------------------------------------------------------
    def trial_runs(self, study_name: str, number: int) -> list:
        query = (f"tags.`{PARENT_RUN_TAG}` = '{self.parent_run_id}' and tags.optuna_trial = '{number}'"
                 f" and tags.optuna_study = '{_quote(study_name)}'")
        return self.client.search_runs([self.experiment_id], filter_string=query)

    def finish_trial(self, study_name: str, trial: optuna.trial.FrozenTrial, *, error: str | None = None,
                     job_dir: str | None = None) -> str | None:
        """Tag the trial's nested run with its Optuna state; create it if the trial never got one."""
        if self.parent_run_id is None:
            return None
        state = trial.state.name
        runs = self.trial_runs(study_name, trial.number)
        if runs:
            run_id = runs[0].info.run_id
        else:
            run = self.client.create_run(
                self.experiment_id,
                run_name=f"{study_name}-trial{trial.number}",
                tags={PARENT_RUN_TAG: self.parent_run_id, "optuna_study": study_name,
                      "optuna_trial": str(trial.number)},
            )
            run_id = run.info.run_id
            params = [Param(k, str(v)) for k, v in trial.params.items()]
            self.client.log_batch(run_id, params=params)
        self.client.set_tag(run_id, STATE_TAG, state)
        if error:
            self.client.set_tag(run_id, "trial_error", error[:MAX_TAG])
        if job_dir:
            self.client.set_tag(run_id, "run_dir", job_dir)
        status = {"COMPLETE": None, "PRUNED": RunStatus.to_string(RunStatus.KILLED),
                  "FAIL": RunStatus.to_string(RunStatus.FAILED)}.get(state)
        current = self.client.get_run(run_id).info.status
        if status is not None and current != status:
            self.client.set_terminated(run_id, status)
        elif status is None and current == "RUNNING":
            self.client.set_terminated(run_id, "FINISHED")
        return run_id


def _quote(text: str) -> str:
    return text.replace("'", "\\'")
