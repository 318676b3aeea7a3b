"""Run directories: ``outputs/runs/{YYYYMMDD_HHmmss}_{master seed as 8 hex digits}/``.

::

    run.json                      run id, master seed, experiment, task, MLflow run id
    phase{N}/checkpoints/         ckpt_phase{N}_step{global_step:08d}.pt (+ .sha256), latest.pt, best.pt
    phase3/opponent_pool/         pool_v{version:04d}_step{step:08d}.pt (+ .sha256, .meta.json), when used
    gates/                        full copies that gate the next phase: bc_best.pt, distill_best.pt
    eval/                         evaluation outputs

The timestamp is UTC. ``resume=true`` continues the newest run directory of the same
experiment and task (``run.json``), with its master seed.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from meeple.checkpoint.io import clean_partial_writes, write_text_atomic
from meeple.errors import MeepleError

RUN_FILE = "run.json"


def make_run_id(master_seed: int, now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    return f"{now:%Y%m%d_%H%M%S}_{master_seed:08x}"


@dataclass
class RunDirectory:
    path: Path
    run_id: str
    master_seed: int
    experiment: str
    task: str
    created: str = field(default_factory=lambda: datetime.now(UTC).isoformat())
    mlflow_run_id: str | None = None  # the run's MLflow run (a pipeline's: its parent run)
    mlflow_tracking_uri: str | None = None
    stage_mlflow_runs: dict[str, str] = field(default_factory=dict)  # pipeline stage index -> MLflow run

    # -- layout --------------------------------------------------------------------------------
    def phase_dir(self, phase: int) -> Path:
        return self.path / f"phase{phase}"

    def checkpoint_dir(self, phase: int) -> Path:
        return self.phase_dir(phase) / "checkpoints"

    def opponent_pool_dir(self, phase: int = 3) -> Path:
        """Created by :class:`meeple.checkpoint.pool.OpponentPool` when a phase uses one."""
        return self.phase_dir(phase) / "opponent_pool"

    @property
    def gates_dir(self) -> Path:
        return self.path / "gates"

    @property
    def eval_dir(self) -> Path:
        return self.path / "eval"

    def prepare(self, phase: int) -> None:
        """Create the phase's folders and remove partial writes a crash left behind."""
        for folder in (self.checkpoint_dir(phase), self.gates_dir, self.eval_dir):
            folder.mkdir(parents=True, exist_ok=True)
            clean_partial_writes(folder)
        if self.opponent_pool_dir(phase).is_dir():
            clean_partial_writes(self.opponent_pool_dir(phase))

    def has_progress(self) -> bool:
        """Whether any stage left a checkpoint or finished."""
        return any(self.path.glob("phase*/checkpoints/ckpt_*.pt")) or any(self.path.glob("phase*/done.json"))

    def discard_if_empty(self) -> bool:
        """Remove the run directory when it holds no file but run.json (empty folders aside): a
        run whose config failed before anything was written (an env that cannot be made, no
        server at transport.address) leaves nothing behind. Returns whether it was removed."""
        if any(p.is_file() and p.name != RUN_FILE for p in self.path.rglob("*")):
            return False
        shutil.rmtree(self.path, ignore_errors=True)
        return True

    # -- run.json ------------------------------------------------------------------------------
    def save(self) -> None:
        record = asdict(self)
        record.pop("path")
        write_text_atomic(self.path / RUN_FILE, json.dumps(record, indent=2) + "\n")

    @classmethod
    def open(cls, path: str | os.PathLike, *, setting: str = "resume_dir") -> RunDirectory:
        """The run in ``path``; ``setting`` is the config key that named it, for the error."""
        if not str(path).strip():
            raise MeepleError(f"{setting} is empty; accepted: a run directory (outputs/runs/<run id>)")
        path = Path(path)
        try:
            record = json.loads((path / RUN_FILE).read_text())
            return cls(path=path, **record)
        except FileNotFoundError:
            raise MeepleError(f"{setting}={str(path)!r} is not a run directory (no {RUN_FILE})") from None
        except (ValueError, TypeError) as err:
            raise MeepleError(f"{path / RUN_FILE} is unreadable ({err})") from None

    @classmethod
    def create(cls, root: str | os.PathLike, *, master_seed: int, experiment: str, task: str,
               now: datetime | None = None) -> RunDirectory:
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        run_id = make_run_id(master_seed, now)
        path, n = root / run_id, 1
        while True:
            try:
                path.mkdir()
                break
            except FileExistsError:  # same second, same seed: keep both runs
                n += 1
                path = root / f"{run_id}-{n}"
        run = cls(path=path, run_id=path.name, master_seed=master_seed, experiment=experiment, task=task)
        run.save()
        return run


def find_latest_run(root: str | os.PathLike, *, experiment: str, task: str,
                    having: str | list[str] | None = None) -> RunDirectory | None:
    """The newest run directory under ``root`` of this experiment and task, or None.

    Runs that hold something (a checkpoint or a finished stage) come before empty ones (a run
    that failed before its first checkpoint). ``having``: only runs with that file (a gate), or
    with every file of a list.
    """
    wanted = [having] if isinstance(having, str) else list(having or [])
    runs = []
    for run_file in Path(root).glob(f"*/{RUN_FILE}"):
        try:
            run = RunDirectory.open(run_file.parent)
        except MeepleError:
            continue
        if run.experiment == experiment and run.task == task and all((run.path / f).is_file() for f in wanted):
            runs.append(run)
    return max(runs, key=lambda r: (r.has_progress(), r.created, r.run_id), default=None)
