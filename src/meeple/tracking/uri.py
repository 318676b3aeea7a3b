"""Tracking URIs without MLflow: what names the same store (light enough for the run directory's
bookkeeping to import)."""

from __future__ import annotations

from pathlib import Path

SQLITE = "sqlite:///"


def absolute_sqlite_uri(uri: str | None) -> str | None:
    """A relative SQLite URI (``sqlite:///outputs/mlflow.db``) resolved against the working
    directory now. MLflow keeps one store per URI string for the life of the process, so a
    relative one would keep writing to the first directory's file after a change of directory
    (two in-process runs from different folders: tests, notebooks)."""
    if uri and uri.startswith(SQLITE) and not uri.startswith((SQLITE + "/", SQLITE + "~")):
        return SQLITE + str(Path.cwd() / uri.removeprefix(SQLITE))
    return uri
