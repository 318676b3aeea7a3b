"""``hydra/sweeper=meeple_optuna``: the sweeper's config node, registered in Hydra's ConfigStore.

Hydra imports every module under ``hydra_plugins`` when it starts, which registers this node;
``conf/hparams_search/*.yaml`` select it with ``override /hydra/sweeper: meeple_optuna``.
"""

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore


@dataclass
class SamplerConf:
    # tpe | cmaes | random | grid | qmc | gp
    name: str = "tpe"
    seed: int | None = None
    # options per sampler name, only the chosen one's are used: {tpe: {n_startup_trials: 5}}
    # (command line: hydra.sweeper.sampler.kwargs.tpe.n_startup_trials=5)
    kwargs: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class PrunerConf:
    # median | percentile | halving (successive halving) | hyperband | threshold | none
    name: str = "median"
    # options per pruner name, only the chosen one's are used:
    # {median: {n_startup_trials: 5, n_warmup_steps: 20000}, halving: {min_resource: 1000}}
    kwargs: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class MeepleOptunaSweeperConf:
    _target_: str = "hydra_plugins.meeple_optuna_sweeper.meeple_optuna_sweeper.MeepleOptunaSweeper"
    # Same name + same storage => the study resumes (adds trials) instead of starting over.
    # null: the experiment's name.
    study_name: str | None = None
    # Any Optuna RDB URL: sqlite:///outputs/optuna.db (default), postgresql://user:pw@host/db ...
    # null: in memory (no resume).
    storage: str | None = "sqlite:///outputs/optuna.db"
    direction: str = "maximize"
    # trials this invocation runs; a resumed study gets this many more
    n_trials: int = 20
    # cap on the study's total trials (all resumes and workers); null: no cap
    max_trials: int | None = None
    # trials asked per launcher batch (Hydra's basic launcher still runs them one by one)
    n_jobs: int = 1
    sampler: SamplerConf = field(default_factory=SamplerConf)
    pruner: PrunerConf = field(default_factory=PrunerConf)
    # seconds between heartbeats of a running trial; a trial silent for grace_period seconds
    # (its worker died) is marked FAIL by the next worker. null: off.
    heartbeat_interval: int | None = 60
    grace_period: int | None = 180
    # optimisation history, parallel coordinates, importances (HTML + PNG) at the end
    plots: bool = True
    # search space: key -> Hydra sweep override (interval, tag(log, interval), choice, range)
    params: dict[str, Any] = field(default_factory=dict)


ConfigStore.instance().store(
    group="hydra/sweeper",
    name="meeple_optuna",
    node=MeepleOptunaSweeperConf,
    provider="meeple",
)
