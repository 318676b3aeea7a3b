"""Which process of a multi-process (DDP) run this one is, known before Lightning starts.

``hardware.devices`` x ``hardware.num_nodes`` > 1 with ``hardware.strategy=ddp`` runs one
learner per device. The process the user started is rank 0: at its first ``Trainer.fit``
Lightning starts the other local ranks by running the same command again, with ``LOCAL_RANK``,
``NODE_RANK`` and ``WORLD_SIZE`` set (``torchrun`` sets ``RANK`` too). Every rank runs the whole
experiment in lockstep (same stages, same rollouts, gradients averaged); only rank 0 writes the
run directory, checkpoints, MLflow and progress. Rank 0 hands the others its run directory and
master seed through the environment Lightning copies to them.
"""

from __future__ import annotations

import logging
import os

from meeple.errors import ConfigError

RUN_DIR_VAR = "MEEPLE_RUN_DIR"
MASTER_SEED_VAR = "MEEPLE_MASTER_SEED"
EXIT_PEER_LOST = 4  # a learner process of a multi-process run died; the others stopped


_command_line = False  # set by ``python train.py``'s entry point (meeple.cli.train.main)


def mark_command_line_run() -> None:
    """This process runs ``python train.py ...``: Lightning may start the other ranks by running
    its command line again (from pytest or a notebook, that command would be the wrong one)."""
    global _command_line
    _command_line = True


def can_launch_ranks() -> bool:
    return _command_line


def world_size(hw) -> int:
    """Learner processes of a hardware profile (1: a single-process run)."""
    return int(hw.devices) * int(hw.num_nodes) if hw.strategy == "ddp" else 1


def launched_rank(hw) -> int:
    """This process's global rank: 0 for the process the user started (before or after
    Lightning launched the others), r for a process Lightning or torchrun started."""
    if world_size(hw) == 1:
        return 0
    if "RANK" in os.environ:  # torchrun, SLURM-style launchers
        return int(os.environ["RANK"])
    local = int(os.environ.get("LOCAL_RANK", 0))
    return int(os.environ.get("NODE_RANK", 0)) * int(hw.devices) + local


def share_with_ranks(run_dir: str | None, master_seed: int) -> None:
    """Rank 0, before its first fit: what the ranks Lightning starts must agree on."""
    if run_dir is not None:
        os.environ[RUN_DIR_VAR] = run_dir
    os.environ[MASTER_SEED_VAR] = str(master_seed)


def shared_master_seed(rank: int) -> int:
    """A rank > 0's master seed: rank 0's (a null ``seed`` draws a fresh one on every process)."""
    value = os.environ.get(MASTER_SEED_VAR)
    if value is None:
        raise ConfigError(
            f"rank {rank} of a multi-process run found no {MASTER_SEED_VAR}: it is set by rank 0 for the "
            "processes it starts; on another machine set it (and MEEPLE_RUN_DIR) to rank 0's values "
            "(docs/scaling.md)"
        )
    return int(value)


def shared_run_dir() -> str | None:
    """A rank > 0's run directory (rank 0's), or None when the run keeps no checkpoints."""
    return os.environ.get(RUN_DIR_VAR)


def quiet_rank(rank: int) -> None:
    """A rank > 0 logs only warnings, each naming the rank (rank 0 tells the run's story)."""

    def name_rank(record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith("rank "):
            record.msg = f"rank {rank}: {record.msg}"
        return True

    for name in ("meeple", "lightning.pytorch", "lightning.fabric"):
        logging.getLogger(name).setLevel(logging.WARNING)
    for handler in logging.getLogger().handlers:  # records of child loggers reach handlers, not parents' filters
        handler.addFilter(name_rank)


def resume_hint() -> str:
    """Where a stopped multi-process run's checkpoints are and how to continue it."""
    run_dir = os.environ.get(RUN_DIR_VAR)
    if run_dir is None:
        return "This run keeps no checkpoints (checkpoint=none): nothing to resume."
    return f"Checkpoints saved so far are in {run_dir}: the same command with resume=true continues."
