"""MLflow run setup: one Lightning MLFlowLogger per run, with tags and the config artifact."""

from __future__ import annotations

import platform
import subprocess
from datetime import datetime, timezone
from pathlib import Path

from lightning.pytorch.loggers import MLFlowLogger
from omegaconf import DictConfig, OmegaConf

import meeple


def git_state(cwd: Path | None = None) -> tuple[str, bool]:
    """(commit sha or 'unknown', dirty flag) of the repository holding meeple."""
    cwd = cwd or Path(meeple.__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5)
        if sha.returncode != 0:
            return "unknown", False
        status = subprocess.run(["git", "status", "--porcelain"], cwd=cwd, capture_output=True, text=True, timeout=5)
        return sha.stdout.strip(), bool(status.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return "unknown", False


def _ensure_sqlite_parent(uri: str) -> None:
    # sqlite cannot create the folder that holds the database file.
    if uri.startswith("sqlite:///"):
        Path(uri.removeprefix("sqlite:///")).expanduser().parent.mkdir(parents=True, exist_ok=True)


def make_mlflow_logger(cfg: DictConfig, *, master_seed: int) -> MLFlowLogger | None:
    """An MLFlowLogger for this run, or None when ``tracking.uri`` is null."""
    tracking = cfg.tracking
    if not tracking.uri:
        return None
    _ensure_sqlite_parent(tracking.uri)
    sha, dirty = git_state()
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    run_name = tracking.run_name or f"{cfg.experiment_name}-s{master_seed}-{stamp}"
    tags = {
        "git_sha": sha,
        "git_dirty": str(dirty),
        "seed": str(master_seed),
        "experiment": str(cfg.experiment_name),
        "hardware": str(cfg.hardware.name),
        "env": str(cfg.env.get("id", cfg.env.backend)),
        "phase": str(cfg.phase.name),
        "host": platform.node(),
        "meeple_version": meeple.__version__,
    }
    artifacts = tracking.get("artifact_location")
    return MLFlowLogger(
        experiment_name=str(tracking.experiment),
        run_name=run_name,
        tracking_uri=tracking.uri,
        tags=tags,
        # Only used when the experiment is created; an absolute URI so any cwd finds it.
        artifact_location=Path(artifacts).expanduser().resolve().as_uri() if artifacts else None,
    )


def log_run_config(logger: MLFlowLogger, cfg: DictConfig, *, master_seed: int, log_artifact: bool) -> None:
    """Flattened config as params (with the resolved seed) and the composed YAML as an artifact."""
    params = OmegaConf.to_container(cfg, resolve=True)
    params["seed"] = master_seed
    logger.log_hyperparams(params)
    if log_artifact:
        text = OmegaConf.to_yaml(cfg, resolve=True)
        logger.experiment.log_text(logger.run_id, text, "config.yaml")
