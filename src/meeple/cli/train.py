"""``python train.py``: run the composed experiment (``meeple.pipeline.runner``) and return
its objective; user errors are one line on stderr."""

from __future__ import annotations

import logging
import sys
import warnings

from omegaconf import DictConfig, OmegaConf

from meeple.distributed import EXIT_PEER_LOST, mark_command_line_run
from meeple.errors import GateFailed, MeepleError, PeerLost

log = logging.getLogger("meeple")

# Known, harmless notices from libraries (our dataset's __len__ is exact: one worker).
warnings.filterwarnings("ignore", message=".*IterableDataset.*has `__len__` defined")
warnings.filterwarnings("ignore", message=".*isinstance\\(treespec, LeafSpec\\)")
# AlphaZero keeps its frozen best network in eval mode on purpose.
warnings.filterwarnings("ignore", message=r".*module\(s\) in eval mode at the start of training")

EXIT_USAGE = 2  # a config or input mistake
EXIT_GATE = 3  # a pipeline gate did not pass
EXIT_INTERRUPTED = 130  # Ctrl-C
# EXIT_PEER_LOST (4, meeple.distributed): a learner process of a multi-process run died


def build_run(cfg: DictConfig, *, check_hardware: bool = True):
    """The first stage of ``cfg``, built but not started (config tests and notebooks)."""
    from meeple.config.schema import check_accelerator
    from meeple.pipeline.lightning_stage import build_stage
    from meeple.pipeline.plan import plan_run
    from meeple.seeding import PhaseSeeds, resolve_master_seed

    stage = plan_run(cfg).stages[0]
    if check_hardware:
        check_accelerator(stage.typed["hardware"])
    return build_stage(stage.cfg, stage.typed, PhaseSeeds(resolve_master_seed(cfg.seed), stage.index))


def train(cfg: DictConfig) -> dict[str, float]:
    """Train as configured; return the final value of every metric of the last stage."""
    from meeple.pipeline.plan import plan_run

    plan = plan_run(cfg)  # config mistakes end here, before torch is imported
    from meeple.pipeline.runner import run_experiment

    return run_experiment(cfg, plan)


def run(cfg: DictConfig) -> float | None:
    """Train and return ``cfg.optimized_metric`` (the objective for sweeps)."""
    return train(cfg).get(cfg.optimized_metric)


def main(cfg: DictConfig) -> float | None:
    """Hydra entry point body: user errors print one clear line and exit 2, a failed gate 3."""
    in_sweep = OmegaConf.select(cfg, "trial.number") is not None
    mark_command_line_run()
    try:
        return run(cfg)
    except MeepleError as err:
        if in_sweep:
            raise  # a sweep trial: the sweeper records it FAIL with this message and goes on
        gate = isinstance(err, GateFailed)
        print(f"meeple: {'' if gate else 'error: '}{err}", file=sys.stderr)
        sys.exit(EXIT_GATE if gate else EXIT_PEER_LOST if isinstance(err, PeerLost) else EXIT_USAGE)
    except KeyboardInterrupt as stop:
        if in_sweep:
            raise
        # Stage runners say what the user can do next (resume, or that nothing can be resumed).
        hint = str(stop) or "continue this run with the same command and resume=true"
        print(f"meeple: stopped by request; {hint}", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
