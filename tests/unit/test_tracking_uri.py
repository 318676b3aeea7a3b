"""A relative SQLite tracking URI is resolved against the working directory where MLflow is
opened: MLflow keeps one store per URI string, so two in-process runs from different folders
would otherwise both write to the first folder's database."""

from pathlib import Path

from meeple.tracking.mlflow import absolute_sqlite_uri, store_uri


def test_a_relative_sqlite_uri_is_made_absolute_in_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert absolute_sqlite_uri("sqlite:///outputs/mlflow.db") == f"sqlite:///{Path.cwd()}/outputs/mlflow.db"
    for kept in ("sqlite:////abs/mlflow.db", "sqlite:///~/mlflow.db", "postgresql://h/db", "http://127.0.0.1:5000", None):
        assert absolute_sqlite_uri(kept) == kept


def test_runs_from_two_folders_write_two_databases(tmp_path, monkeypatch):
    """The bug it fixes: MLflow keeps one store per URI string, so with the relative URI the
    second folder's experiment went into the first folder's database."""
    from mlflow import MlflowClient

    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        monkeypatch.chdir(tmp_path / name)
        MlflowClient(tracking_uri=store_uri("sqlite:///outputs/mlflow.db")).create_experiment(name)
    for name, other in (("a", "b"), ("b", "a")):
        client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / name}/outputs/mlflow.db")
        assert client.get_experiment_by_name(name) is not None and client.get_experiment_by_name(other) is None
