"""MLflow run setup: one Lightning MLFlowLogger per run, with tags and the config artifact.

Every run records: the composed config (params + ``config.yaml``), git sha and dirty flag,
seed, hardware profile, host (name, OS, Python, CPUs, memory, GPUs), meeple's and the key
packages' versions, its Hydra run directory and meeple run directory (checkpoints, gates; tags
``meeple.run_dir``, ``meeple.run_id``), and MLflow's system metrics (``system/*``:
CPU, memory, disk, network, GPU when present) sampled by a background thread. Inside a
sweep (``tracking.parent_run_id`` set) the run is nested under the sweep's parent run.
"""

from __future__ import annotations

import logging
import os
import platform
import re
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from lightning.pytorch.loggers import MLFlowLogger
from lightning.pytorch.utilities import rank_zero_only
from omegaconf import DictConfig, OmegaConf

import meeple
from meeple.provenance import git_state
from meeple.tracking.uri import SQLITE, absolute_sqlite_uri
from meeple.writer_thread import WriterThread

log = logging.getLogger(__name__)

# Packages whose versions every run records (tag ``version.<name>``).
KEY_PACKAGES = ("torch", "torchrl", "tensordict", "lightning", "hydra-core", "optuna", "mlflow", "gymnasium")
PARENT_RUN_TAG = "mlflow.parentRunId"  # MLflow's own tag: the UI nests the run under its parent


def package_versions() -> dict[str, str]:
    """``version.<package>`` tags for meeple and :data:`KEY_PACKAGES`."""
    versions = {"version.meeple": meeple.__version__}
    for name in KEY_PACKAGES:
        try:
            versions[f"version.{name}"] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[f"version.{name}"] = "not installed"
    return versions


def host_info() -> dict[str, str]:
    """``host*`` tags: name, OS, Python, CPU count, memory and GPUs of this machine."""
    info = {
        "host": platform.node(),
        "host.os": platform.platform(),
        "host.python": platform.python_version(),
        "host.cpus": str(os.cpu_count()),
    }
    try:
        import psutil

        info["host.memory_gb"] = f"{psutil.virtual_memory().total / 2**30:.1f}"
    except ImportError:
        pass
    try:
        import torch

        if torch.cuda.is_available():
            names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            info["host.gpus"] = ", ".join(names)
        else:
            info["host.gpus"] = "none"
    except Exception:  # a broken driver must not stop tracking
        info["host.gpus"] = "unknown"
    return info


def environment_tags() -> dict[str, str]:
    """Tags every MLflow run of the project carries (training runs and sweep parents)."""
    git = git_state()
    return {"git_sha": git["sha"], "git_dirty": str(bool(git["uncommitted"])), **host_info(), **package_versions()}


def run_directory() -> str | None:
    """This job's Hydra output directory, when Hydra runs the job."""
    try:
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.initialized():
            return str(HydraConfig.get().runtime.output_dir)
    except Exception:
        pass
    return None


def get_or_create_experiment(client: Any, name: str, artifact_location: str | None) -> str:
    """The id of MLflow experiment ``name``, created (with ``artifact_location``) if missing."""
    experiment = client.get_experiment_by_name(name)
    if experiment is not None and experiment.lifecycle_stage != "deleted":
        return experiment.experiment_id
    location = Path(artifact_location).expanduser().resolve().as_uri() if artifact_location else None
    return client.create_experiment(name, artifact_location=location)


def store_uri(uri: str) -> str:
    """The tracking URI to open: a relative SQLite path made absolute in the working directory
    (:func:`absolute_sqlite_uri`), its folder created (sqlite cannot)."""
    uri = absolute_sqlite_uri(uri)
    if uri.startswith(SQLITE):
        Path(uri.removeprefix(SQLITE)).expanduser().parent.mkdir(parents=True, exist_ok=True)
    return uri


def run_usable(uri: str, run_id: str) -> bool:
    """Whether the store at ``uri`` holds ``run_id`` as an active run a resume can log to (one a
    run directory recorded may be gone or deleted: the store replaced, the run deleted in the UI);
    any other error of the store raises."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    try:
        run = MlflowClient(tracking_uri=store_uri(uri)).get_run(run_id)
    except MlflowException as e:
        if e.error_code == "RESOURCE_DOES_NOT_EXIST":
            return False
        raise
    return run.info.lifecycle_stage == "active"


def _env_tag(cfg: DictConfig) -> str:
    """The env's id or backend; phases on a native game (AlphaZero) name the game."""
    env = OmegaConf.select(cfg, "env", default=None)
    if env is None:
        return str(OmegaConf.select(cfg, "phase.game", default="none"))
    return str(env.get("id", env.backend))


def _run_tags(cfg: DictConfig, master_seed: int, run_dir: str | Path | None) -> tuple[dict[str, str], str]:
    """Tags every training run carries, and its default name."""
    tracking = cfg.tracking
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    run_name = tracking.run_name or f"{cfg.experiment_name}-s{master_seed}-{stamp}"
    tags = {
        **environment_tags(),
        "seed": str(master_seed),
        "experiment": str(cfg.experiment_name),
        "hardware": str(cfg.hardware.name),
        "meeple_version": meeple.__version__,
    }
    if hydra_dir := run_directory():
        tags["run_dir"] = hydra_dir
    if run_dir is not None:
        tags["meeple.run_dir"] = str(Path(run_dir).resolve())
        tags["meeple.run_id"] = Path(run_dir).name
    # Inside a sweep: nest under the sweep's parent run and say which trial this is.
    if parent := OmegaConf.select(cfg, "tracking.parent_run_id", default=None):
        tags[PARENT_RUN_TAG] = str(parent)
    trial_number = OmegaConf.select(cfg, "trial.number", default=None)
    if trial_number is not None:
        study = OmegaConf.select(cfg, "trial.study", default=None)
        tags.update(optuna_study=str(study), optuna_trial=str(trial_number))
        if not tracking.run_name:
            run_name = f"{study}-trial{trial_number}"
    return tags, run_name


def make_mlflow_logger(cfg: DictConfig, *, master_seed: int, run_dir: str | Path | None = None,
                       continue_run_id: str | None = None, stage: tuple[int, str] | None = None,
                       parent_run_id: str | None = None, step_offset: int = 0) -> MLFlowLogger | None:
    """An MLFlowLogger for this run (or one stage of a pipeline), or None when ``tracking.uri`` is null.

    ``run_dir`` is the meeple run directory (tagged); ``continue_run_id`` resumes logging into
    an existing MLflow run (a resumed training run) instead of creating one. A pipeline's stage
    passes ``stage=(index, name)``, its pipeline run as ``parent_run_id`` and the steps of the
    stages before it as ``step_offset``, so the global step runs on across stages.
    """
    tracking = cfg.tracking
    if not tracking.uri:
        return None
    uri = store_uri(tracking.uri)
    tags, run_name = _run_tags(cfg, master_seed, run_dir)
    tags.update(env=_env_tag(cfg), phase=str(cfg.phase.name))
    if stage is not None:
        tags.update({"meeple.phase_index": str(stage[0]), "meeple.stage": stage[1]})
        run_name = f"{run_name}-{stage[0]}-{stage[1]}"
    if parent_run_id is not None:
        tags[PARENT_RUN_TAG] = parent_run_id
    artifacts = tracking.get("artifact_location")
    return MeepleMLFlowLogger(
        experiment_name=str(tracking.experiment),
        run_name=run_name,
        tracking_uri=uri,
        tags=tags,
        # Only used when the experiment is created; an absolute URI so any cwd finds it.
        artifact_location=Path(artifacts).expanduser().resolve().as_uri() if artifacts else None,
        system_metrics=bool(OmegaConf.select(cfg, "tracking.system_metrics", default=True)),
        system_metrics_interval=float(OmegaConf.select(cfg, "tracking.system_metrics_interval", default=10.0)),
        flush_every_s=float(OmegaConf.select(cfg, "tracking.flush_every_s", default=5.0)),
        run_id=continue_run_id,
        step_offset=step_offset,
    )


class PipelineRun:
    """The MLflow parent run of a multi-stage experiment; each stage's run nests under it.

    Created through MLflow's client (no global active run); a resumed pipeline continues its
    parent. :meth:`finish` sets the final status and, for a failed gate, the gate's message.
    """

    def __init__(self, cfg: DictConfig, *, master_seed: int, run_dir: str | Path | None, stages: list[str],
                 continue_run_id: str | None = None) -> None:
        from mlflow import MlflowClient

        tracking = cfg.tracking
        self.client = MlflowClient(tracking_uri=store_uri(tracking.uri))
        if continue_run_id is not None:
            self.run_id = continue_run_id
            self.client.update_run(continue_run_id, status="RUNNING")
            return
        artifacts = tracking.get("artifact_location")
        experiment_id = get_or_create_experiment(self.client, str(tracking.experiment), artifacts)
        tags, run_name = _run_tags(cfg, master_seed, run_dir)
        tags["meeple.pipeline"] = " -> ".join(stages)
        self.run_id = self.client.create_run(experiment_id, run_name=run_name, tags=tags).info.run_id
        self.client.log_param(self.run_id, "seed", master_seed)
        if tracking.log_config_artifact:
            self.client.log_text(self.run_id, OmegaConf.to_yaml(cfg, resolve=True), "config.yaml")

    def log_stage_end(self, index: int, name: str, metrics: dict[str, float], step: int) -> None:
        self.client.set_tag(self.run_id, f"meeple.stage{index}", f"{name}: done at step {step}")
        for key, value in metrics.items():
            self.client.log_metric(self.run_id, key, float(value), step=step)

    def finish(self, status: str, *, gate_failure: str | None = None) -> None:
        if gate_failure is not None:
            self.client.set_tag(self.run_id, "meeple.gate_failed", gate_failure[:5000])
        self.client.set_terminated(self.run_id, status)


class MeepleMLFlowLogger(MLFlowLogger):
    """Lightning's MLFlowLogger plus MLflow's system metrics (``system/*``) for the run, with
    metrics gathered and written in batches on a background thread.

    Runs are created through MLflow's client, not ``mlflow.start_run``, so MLflow's
    ``log_system_metrics`` does not apply; this logger starts the same
    ``SystemMetricsMonitor`` (a background thread: no per-step cost) once the run exists and
    stops it in :meth:`finalize`. Disable with ``++tracking.system_metrics=false``.

    ``log_metrics`` fixes values, step and timestamp at the call and returns. Metrics go to the
    store at most every ``flush_every_s`` seconds, in one ``log_batch`` on the writer thread: one
    sqlite insert per rollout cost 3-4.5 ms of CPU on a quiet 2-core machine (20 ms on a busy
    one), most of it holding the GIL (``python -m meeple.bench ppo``). Every other use of the
    client (``experiment``: reads, tags, artifacts, run status) first sends and waits for what is
    pending, so a reader sees every metric logged before it, in order; :meth:`finalize` too.
    A failed write raises at the next ``log_metrics`` or at that wait.

    Crash safety: a checkpoint stores the metrics not yet known to be in the store
    (:meth:`pending_metrics`) and a resumed run sends them again (:meth:`resume`). MLflow drops
    a metric identical in key, value, step and timestamp to a stored one, so those that did land
    before the crash are not doubled; steps the resumed run repeats are not logged twice.
    """

    def __init__(self, *args: Any, system_metrics: bool = True, system_metrics_interval: float = 10.0,
                 step_offset: int = 0, flush_every_s: float = 5.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if flush_every_s < 0:
            raise ValueError(f"tracking.flush_every_s={flush_every_s}; accepted: a number of seconds >= 0")
        self.step_offset = step_offset  # steps of the pipeline's earlier stages
        self.flush_every_s = flush_every_s
        self._system_metrics_wanted = system_metrics
        self._system_metrics_interval = system_metrics_interval
        self._system_monitor: Any = None
        self._writer = WriterThread("meeple-mlflow")
        self._run_ready = False
        self._unsent: list[Any] = []  # mlflow.entities.Metric, not yet handed to the writer
        self._not_stored: list[Any] = []  # logged and not yet committed, oldest first (writer is FIFO)
        self._lock = threading.Lock()  # _not_stored: appended here, trimmed by the writer
        self._last_send = time.monotonic()
        self._stored_through: dict[str, int] = {}  # a resumed run: the last step the store has per key

    @property
    def experiment(self) -> Any:
        if not self._writer.in_writer():
            self._send()
            self._writer.wait()  # the caller sees every metric logged before it
        client = super().experiment
        if self._system_metrics_wanted and self._run_id is not None:
            self._system_metrics_wanted = False  # start once
            self._system_monitor = start_system_metrics(self._run_id, self._tracking_uri, self._system_metrics_interval)
        return client

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        if not self._run_ready:
            self.experiment  # noqa: B018 - creates the run now, on this thread (an error raises here)
            self._run_ready = True
        if self._prefix:
            metrics = {f"{self._prefix}{self.LOGGER_JOIN_CHAR}{k}": v for k, v in metrics.items()}
        batch = _as_mlflow_metrics(metrics, 0 if step is None else step + self.step_offset)
        if self._stored_through:
            batch = [m for m in batch if m.step > self._stored_through.get(m.key, -1)]
        self._queue(batch)
        if time.monotonic() - self._last_send >= self.flush_every_s:
            self._send()

    def _queue(self, batch: list[Any]) -> None:
        with self._lock:
            self._not_stored.extend(batch)
        self._unsent.extend(batch)

    def _send(self) -> None:
        """Hand everything unsent to the writer as one batch (MLflow takes <= 1000 per call)."""
        self._last_send = time.monotonic()
        if not self._unsent or self._run_id is None:
            return
        batch, self._unsent = self._unsent, []
        client, run_id, kwargs = self._mlflow_client, self._run_id, self._log_batch_kwargs

        def write() -> None:
            for start in range(0, len(batch), 1000):
                client.log_batch(run_id=run_id, metrics=batch[start:start + 1000], **kwargs)
            with self._lock:
                del self._not_stored[:len(batch)]

        self._writer.submit(write)

    def pending_metrics(self) -> list[tuple[str, float, int, int]]:
        """(key, value, timestamp ms, step) of each metric logged and not yet in the store."""
        with self._lock:
            return [(m.key, m.value, m.timestamp, m.step) for m in self._not_stored]

    def resume(self, pending: list[tuple[str, float, int, int]]) -> None:
        """Continue the run after a crash, from a checkpoint that held ``pending`` (see
        :meth:`pending_metrics`): send those again, and drop what the resumed run logs again for a
        step the store already has (the rollouts between that checkpoint and the crash; on CPU
        their values are the same), so the history has no doubled points."""
        from mlflow.entities import Metric

        client = self.experiment
        for key in client.get_run(self._run_id).data.metrics:
            steps = [m.step for m in client.get_metric_history(self._run_id, key)]
            if steps:
                self._stored_through[key] = max(steps)
        self._run_ready = True
        if pending:
            self._queue([Metric(key=k, value=v, timestamp=t, step=s) for k, v, t, s in pending])
            self._send()

    def flush(self) -> None:
        """Wait until every logged metric is in the store."""
        self._send()
        self._writer.wait()

    def finalize(self, status: str = "success") -> None:
        try:
            self._send()
            self._writer.close()
        finally:
            if self._system_monitor is not None:
                monitor, self._system_monitor = self._system_monitor, None
                try:
                    monitor.finish()
                except Exception as err:  # never let metrics bookkeeping fail a run
                    log.warning("stopping MLflow system metrics failed: %s", err)
            super().finalize(status)


_METRIC_NAME = re.compile(r"[^a-zA-Z0-9_/. -]+")  # what MLflow accepts in a metric name
_warned: set[str] = set()  # each dropped or renamed metric is reported once per process


def _as_mlflow_metrics(metrics: Mapping[str, Any], step: int) -> list[Any]:
    """MLflow ``Metric`` records stamped now, as Lightning's MLFlowLogger makes them: string
    values dropped, names stripped of characters MLflow refuses (each with a warning)."""
    from mlflow.entities import Metric

    timestamp_ms = int(time.time() * 1000)
    records = []
    for key, value in metrics.items():
        if isinstance(value, str):
            if key not in _warned:
                _warned.add(key)
                log.warning("discarding metric with string value %s=%s", key, value)
            continue
        name = _METRIC_NAME.sub("", key)
        if name != key and key not in _warned:
            _warned.add(key)
            log.warning("MLflow allows only '_', '/', '.' and ' ' as special characters in metric names; "
                        "%r logged as %r", key, name)
        records.append(Metric(key=name, value=float(value), timestamp=timestamp_ms, step=step))
    return records


def start_system_metrics(run_id: str, tracking_uri: str, interval: float) -> Any:
    """Start MLflow's system metrics monitor for ``run_id`` (None if psutil is missing)."""
    try:
        from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor
    except ImportError as err:  # psutil missing
        log.warning("MLflow system metrics are off: %s (pip install psutil)", err)
        return None
    # The monitor logs through its own client: silence its per-run INFO lines.
    logging.getLogger("mlflow.system_metrics").setLevel(logging.WARNING)
    monitor = SystemMetricsMonitor(run_id, sampling_interval=interval, tracking_uri=tracking_uri)
    monitor.start()
    return monitor


# Run-control keys (how a run starts, not what it trains) are not params.
_NOT_PARAMS = ("resume", "resume_dir")


def log_run_config(logger: MLFlowLogger, cfg: DictConfig, *, master_seed: int, log_artifact: bool,
                   resumed: bool = False) -> None:
    """Flattened config as params (with the resolved seed) and the composed YAML as an artifact.

    A resumed run logs only params the run lacks (MLflow refuses changed values) and warns
    about changed ones; its config goes to ``config_resumed.yaml``.
    """
    params = OmegaConf.to_container(cfg, resolve=True)
    for key in _NOT_PARAMS:
        params.pop(key, None)
    params["seed"] = master_seed
    if resumed:
        from lightning.fabric.utilities.logger import _flatten_dict

        logged = logger.experiment.get_run(logger.run_id).data.params
        flat = {k: v for k, v in _flatten_dict(params).items() if k not in logged}
        changed = sorted(k for k, v in _flatten_dict(params).items() if k in logged and str(v)[:250] != logged[k])
        if changed:
            log.warning("resumed run: params changed since the run started (MLflow keeps the first values): %s",
                        ", ".join(changed))
        params = flat
    if params:
        logger.log_hyperparams(params)
    if log_artifact:
        text = OmegaConf.to_yaml(cfg, resolve=True)
        logger.experiment.log_text(logger.run_id, text, "config_resumed.yaml" if resumed else "config.yaml")
