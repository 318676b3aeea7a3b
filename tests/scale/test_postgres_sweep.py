"""Opt-in: two sweep workers share one Optuna study and one MLflow store on a real PostgreSQL.

    MEEPLE_TEST_POSTGRES=1 python -m pytest tests/scale -n 0 -s

starts a local server (Debian's postgresql package; tests/scale/postgres.py), initialises both
databases once, launches two ``python train.py -m`` workers at the same time against them and
checks what docs/scaling.md promises: one study, trials numbered without gaps or repeats, each
worker's trials recorded as its own, every trial's MLflow run nested under one parent run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter

import pytest

from tests.conftest import REPO
from tests.scale.postgres import LocalPostgres, missing

REASON = missing()
pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(not os.environ.get("MEEPLE_TEST_POSTGRES"),
                       reason="opt-in: MEEPLE_TEST_POSTGRES=1 python -m pytest tests/scale"),
    pytest.mark.skipif(REASON is not None, reason=f"no local PostgreSQL: {REASON}"),
]
TRIALS_PER_WORKER = 3


@pytest.fixture
def postgres():
    server = LocalPostgres(("optuna", "mlflow")).start()
    try:
        yield server
    finally:
        server.stop()


def test_two_workers_share_one_study_and_one_tracking_store(postgres, tmp_path):
    import mlflow
    import optuna

    # Schemas first, once: two workers creating them at the same moment would race.
    optuna.storages.RDBStorage(postgres.url("optuna"))
    mlflow.MlflowClient(postgres.url("mlflow")).search_experiments()

    command = [sys.executable, str(REPO / "train.py"), "-m", "hparams_search=ppo_cartpole", "debug=tiny",
               "callbacks.progress=null", "phase.minibatch_size=choice(8,16)", "phase.lr=tag(log,interval(3e-4,3e-3))",
               f"hydra.sweeper.n_trials={TRIALS_PER_WORKER}", "hydra.sweeper.study_name=shared",
               f"hydra.sweeper.storage={postgres.url('optuna')}", f"tracking.uri={postgres.url('mlflow')}"]
    workers = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        workers.append(subprocess.Popen(command, cwd=tmp_path / name, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True))
    outputs = [w.communicate(timeout=900)[0] for w in workers]
    for worker, output in zip(workers, outputs):
        assert worker.returncode == 0, output[-4000:]

    study = optuna.load_study(study_name="shared", storage=postgres.url("optuna"))
    trials = study.trials
    assert sorted(t.number for t in trials) == list(range(2 * TRIALS_PER_WORKER))
    assert all(t.state.name == "COMPLETE" for t in trials)
    by_worker = Counter(t.user_attrs["worker"] for t in trials)
    assert sorted(by_worker.values()) == [TRIALS_PER_WORKER] * 2, by_worker
    print("trials by worker:", dict(by_worker))  # the session's result (pytest -s)

    client = mlflow.MlflowClient(postgres.url("mlflow"))
    runs = client.search_runs([client.get_experiment_by_name("default").experiment_id])
    parents = [r for r in runs if r.data.tags.get("sweep") == "true"]
    children = [r for r in runs if r.data.tags.get("optuna_trial") is not None]
    assert len(parents) == 1, [p.info.run_name for p in parents]
    assert sorted(int(r.data.tags["optuna_trial"]) for r in children) == list(range(2 * TRIALS_PER_WORKER))
    assert {r.data.tags["mlflow.parentRunId"] for r in children} == {parents[0].info.run_id}
    assert all(r.info.status == "FINISHED" and "eval/episode_return" in r.data.metrics for r in children)
