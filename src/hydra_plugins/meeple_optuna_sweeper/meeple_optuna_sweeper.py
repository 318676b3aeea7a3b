"""Hydra Sweeper on Optuna 5 (``hydra/sweeper=meeple_optuna``): a thin adapter.

Hydra imports this module at start-up to discover plugins, so it imports nothing heavy;
the study logic is :mod:`meeple.sweep`.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any
from collections.abc import Sequence

from hydra.core.utils import JobReturn
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

# Registers the config node when Hydra scans the plugins.
from hydra_plugins.meeple_optuna_sweeper.config import MeepleOptunaSweeperConf  # noqa: F401

log = logging.getLogger(__name__)


class MeepleOptunaSweeper(Sweeper):
    def __init__(self, **settings: Any) -> None:
        self.settings = {
            k: OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v
            for k, v in settings.items()
        }
        self.config: DictConfig | None = None
        self.launcher = None
        self.hydra_context: HydraContext | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        from hydra.core.plugins import Plugins

        self.config = config
        self.hydra_context = hydra_context
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def sweep(self, arguments: list[str]) -> Any:
        from meeple.errors import MeepleError
        from meeple.sweep.runner import SweepRunner, SweepSettings
        from meeple.sweep.space import parse_search_space
        from meeple.sweep.tracking import SweepTracking

        assert self.config is not None and self.launcher is not None
        cfg = self.config
        s = self.settings
        try:
            space = parse_search_space(s.get("params"), arguments)
            metric = str(OmegaConf.select(cfg, "optimized_metric", default="objective"))
            settings = SweepSettings(
                study_name=s.get("study_name") or str(OmegaConf.select(cfg, "experiment_name", default="meeple")),
                storage=s.get("storage"),
                direction=s.get("direction", "maximize"),
                n_trials=int(s.get("n_trials", 20)),
                max_trials=s.get("max_trials"),
                n_jobs=int(s.get("n_jobs", 1)),
                sampler=s.get("sampler") or {},
                pruner=s.get("pruner") or {},
                heartbeat_interval=s.get("heartbeat_interval"),
                grace_period=s.get("grace_period"),
                plots=bool(s.get("plots", True)),
                metric=metric,
            )
            tracking = None
            uri = OmegaConf.select(cfg, "tracking.uri", default=None)
            if uri:
                tracking = SweepTracking(
                    str(uri),
                    str(OmegaConf.select(cfg, "tracking.experiment", default=cfg.get("experiment_name"))),
                    OmegaConf.select(cfg, "tracking.artifact_location", default=None),
                )
            sweep_dir = Path(str(cfg.hydra.sweep.dir))
            sweep_dir.mkdir(parents=True, exist_ok=True)
            OmegaConf.save(cfg, sweep_dir / "multirun.yaml")
            # hparams_search=<name> stays in the printed command: without -m it reruns the trial's config.
            runner = SweepRunner(settings, space, self._launch, sweep_dir=sweep_dir, tracking=tracking,
                                 command=space.fixed)
            runner.create_study()
        except MeepleError as err:  # a bad sweep config: one line and exit 2, like train.py's errors
            print(f"meeple: error: {err}", file=sys.stderr)
            sys.exit(2)
        study = runner.run()
        verdict = runner.all_failed()
        if verdict:  # nothing was learned: exit non-zero so scripts and CI notice
            print(f"meeple: error: {verdict}", file=sys.stderr)
            sys.exit(1)
        return study

    def _launch(self, batch: list[list[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        assert self.launcher is not None
        return self.launcher.launch(batch, initial_job_idx=initial_job_idx)
