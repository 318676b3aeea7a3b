"""Run an experiment top to bottom: plan the stages, fix the run directory and master seed,
open tracking, then each stage in order (transition, build, fit, record).

The plan (``plan_run``) hands typed records on: the session gets the run's identity,
checkpointing and tracking; each stage its validated config and checkpoint policy.

Every run goes through here; a single-phase run is a pipeline of one stage and behaves as it
always did (phase index 0, one MLflow run). A multi-stage run gets one MLflow parent run with
a child per stage, its global step running on across stages.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from omegaconf import DictConfig, open_dict

from meeple.checkpoint.callback import gate_path
from meeple.checkpoint.io import copy_verified
from meeple.checkpoint.run_dir import RUN_FILE, RunDirectory, find_latest_run
from meeple.checkpoint.session import RunSession, follow_session, read_done, start_session
from meeple.config.run import TrackingPlan, run_config
from meeple.config.schema import check_accelerator
from meeple.distributed import (
    can_launch_ranks,
    launched_rank,
    quiet_rank,
    share_with_ranks,
    shared_master_seed,
    shared_run_dir,
    world_size,
)
from meeple.errors import ConfigError, GateFailed
from meeple.pipeline.plan import Plan, Stage, plan_run
from meeple.pipeline.transition import StageStart, open_start
from meeple.seeding import PhaseSeeds, resolve_master_seed

log = logging.getLogger("meeple")


@dataclass
class StageContext:
    """What a stage runner gets besides its stage: the run it belongs to."""

    master_seed: int
    session: RunSession | None
    start: StageStart
    step_offset: int  # optimiser steps of the stages before it (the global step runs on)
    parent_run_id: str | None  # the pipeline's MLflow run (None for a single stage)
    count: int  # stages in the pipeline
    tracking: TrackingPlan
    rank: int = 0  # this process's rank in a multi-process run (only rank 0 writes)
    # Says where the run writes, once, when the first stage has been built: a config that fails
    # while building (an env that cannot be made, no env server) prints its one error line alone.
    announce: Callable[[], None] = lambda: None


class _Announcement:
    """Log lines held back until :meth:`__call__` (once)."""

    def __init__(self) -> None:
        self.lines: list[tuple] = []

    def __call__(self) -> None:
        lines, self.lines = self.lines, []
        for line in lines:
            log.info(*line)


def run_experiment(cfg: DictConfig, plan: Plan | None = None) -> dict[str, float]:
    """Train as configured (``plan``: ``plan_run(cfg)``, every stage validated before any work);
    return the final metrics of the last stage run."""
    plan = plan or plan_run(cfg)
    for stage in plan.stages[plan.start : plan.stop + 1]:
        check_accelerator(stage.typed["hardware"])
    hardware = plan.stages[plan.start].typed["hardware"]
    if world_size(hardware) > 1:
        _check_can_launch_ranks(plan, hardware)
    rank = launched_rank(hardware)
    if rank > 0:  # a process Lightning started for a multi-process run: rank 0 writes everything
        return _run_as_rank(plan, rank)
    session = start_session(plan.identity, plan.checkpoints, plan.tracking, stages=[s.name for s in plan.stages])
    source = _source_run(plan, session) if plan.start > 0 and not (session and session.resumed) else None
    announce = _Announcement()
    if session is not None:
        master, origin = session.master_seed, "of the resumed run" if session.resumed else _origin(plan)
        run = session.open()
        announce.lines.append(("run directory %s", run.path))
    else:
        master, origin, run = resolve_master_seed(plan.identity.seed), _origin(plan), None
    announce.lines.append(("master seed %d (%s)", master, origin))
    if world_size(hardware) > 1:  # the ranks Lightning starts at the first fit take these
        share_with_ranks(str(run.path) if run else None, master)
        log.info("%d learner processes (hardware=%s, strategy=ddp); this one is rank 0", world_size(hardware),
                 hardware.name)

    pipeline_run = _open_pipeline_run(cfg, plan, master, session)
    status, failure, config_error = "FAILED", None, False
    try:
        metrics = _run_stages(plan, master, session, pipeline_run, source, announce=announce)
        status = "FINISHED"
        return metrics
    except GateFailed as err:
        failure = str(err)
        raise
    except ConfigError:
        config_error = True  # its one line is all the user needs to read
        if run is not None and not session.resumed:
            run.discard_if_empty()  # a config that failed before anything was written
        raise
    except KeyboardInterrupt:
        status = "KILLED"
        raise
    finally:
        if not config_error:
            announce()
        if pipeline_run is not None:
            pipeline_run.finish(status, gate_failure=failure)


def _check_can_launch_ranks(plan: Plan, hardware: Any) -> None:
    """Lightning starts the other ranks by running this process's command line again: that must be
    ``python train.py ...`` (one run), not a sweep or a Python session."""
    where = f"hardware={hardware.name} runs {world_size(hardware)} learner processes (strategy=ddp)"
    if plan.in_sweep:
        raise ConfigError(f"{where}, which a sweep trial cannot start; accepted: a single-process profile in "
                          "sweeps (run more sweep workers instead: docs/scaling.md)")
    if not can_launch_ranks():
        raise ConfigError(f"{where} by running the command again: start it as python train.py ..., not from "
                          "Python; accepted here: a single-process profile (e.g. hardware=cpu)")


def _run_as_rank(plan: Plan, rank: int) -> dict[str, float]:
    """Rank ``rank`` > 0 of a multi-process run: the same stages in lockstep with rank 0, in rank
    0's run directory and with its master seed, writing nothing (no run directory, checkpoint
    file, MLflow run or progress bar of its own)."""
    quiet_rank(rank)
    session = follow_session(plan.identity, plan.checkpoints, plan.tracking, stages=[s.name for s in plan.stages],
                             run_dir=shared_run_dir(), rank=rank)
    master = session.master_seed if session else shared_master_seed(rank)
    return _run_stages(plan, master, session, None, None, rank=rank)


def _origin(plan: Plan) -> str:
    return "from config" if plan.identity.seed is not None else "drawn from os.urandom"


def _continued_mlflow_run(session: RunSession | None, index: int | None, tracking: TrackingPlan) -> str | None:
    """The MLflow run a resumed run goes on logging to (index None: a pipeline's parent run), or
    None for a new one: a fresh run, another store, or a recorded run the store no longer holds."""
    run_id = session.mlflow_run(index) if session and session.resumed and tracking.uri else None
    if run_id is None:
        return None
    from meeple.tracking.mlflow import run_usable

    if not run_usable(tracking.uri, run_id):
        log.warning("the MLflow run %s that %s records is not an active run in %s; its metrics so far stay where "
                    "they were, and this run logs to a new MLflow run", run_id, session.run.path / RUN_FILE,
                    tracking.uri)
        if index is None:  # the stages' runs were its children: new ones under the new parent
            session.forget_mlflow_runs()
        return None
    return run_id


def _open_pipeline_run(cfg: DictConfig, plan: Plan, master: int, session: RunSession | None) -> Any:
    """The MLflow parent run of a pipeline (``cfg``: what it records as its config)."""
    if not plan.is_pipeline or not plan.tracking.uri:
        return None
    from meeple.tracking.mlflow import PipelineRun

    run_dir = session.run.path if session else None
    pipeline_run = PipelineRun(cfg, master_seed=master, run_dir=run_dir, stages=[s.name for s in plan.stages],
                               continue_run_id=_continued_mlflow_run(session, None, plan.tracking))
    session.record_mlflow_run(None, pipeline_run.run_id)
    log.info("MLflow pipeline run %s in %s (experiment %r)", pipeline_run.run_id, plan.tracking.uri,
             plan.tracking.experiment)
    return pipeline_run


def _run_stages(plan: Plan, master: int, session: RunSession | None, pipeline_run: Any,
                source: RunDirectory | None, *, rank: int = 0,
                announce: Callable[[], None] = lambda: None) -> dict:
    step, metrics = 0, {}
    by_name = {s.name: s for s in plan.stages}
    if session is not None and session.resumed and all(session.done(s.index) for s in plan.stages[: plan.stop + 1]):
        log.warning("run %s is complete (every stage up to %s finished): nothing to resume",
                    session.run.path, plan.stages[plan.stop].label)
    for stage in plan.stages[: plan.stop + 1]:
        record = session.done(stage.index) if session else None
        if record is None and stage.index < plan.start:
            if rank > 0:  # rank 0 imported it before it started this process
                raise ConfigError(f"rank {rank}: {stage.label} is not recorded in {session.run.path}")
            record = _import_stage(plan, stage, session, source)
        if record is not None:
            if "imported_from" not in record:
                log.info("%s finished earlier (%s): not run again", stage.label, record.get("finished", "?"))
            step, metrics = int(record["step_end"]), dict(record["metrics"])
            continue
        stage_cfg = _pin_seed(stage.cfg, master)
        if stage.index == 0:
            start = StageStart(stage.typed["transition"])
        else:
            transition = stage.typed["transition"]
            previous = plan.stages[stage.index - 1]
            start = open_start(session.run, transition, previous=previous,
                               source=by_name[transition.source] if transition.source else previous,
                               teacher=by_name[transition.teacher] if transition.teacher else None,
                               label=stage.label, experiment=plan.identity.experiment)
        if plan.is_pipeline:
            log.info("%s of %d: %s", stage.label, len(plan.stages), stage.kind.name)
        context = StageContext(master, session, start, step, pipeline_run.run_id if pipeline_run else None,
                               len(plan.stages), plan.tracking, rank, announce)
        if stage.kind.is_lightning:
            metrics, steps = _run_lightning(stage, stage_cfg, context)
        else:
            announce()
            metrics, steps = stage.kind.runner()(stage, stage_cfg, context)
        step += steps
        if session is not None:  # a following rank's session writes nothing
            session.mark_done(stage.index, dict(name=stage.name, kind=stage.kind.name, metrics=metrics,
                                                steps=steps, step_end=step, finished=_now()))
        if pipeline_run is not None:
            pipeline_run.log_stage_end(stage.index, stage.name, metrics, step)
    return metrics


def _run_lightning(stage: Stage, cfg: DictConfig, context: StageContext) -> tuple[dict, int]:
    from meeple.phases.registry import Hook
    from meeple.pipeline.lightning_stage import build_stage, fit_stage
    from meeple.tracking.mlflow import log_run_config, make_mlflow_logger

    session = context.session
    build = build_stage(cfg, stage.typed, PhaseSeeds(context.master_seed, stage.index, context.rank))
    context.announce()
    context.start.apply(build.module, stage.kind.hooks)
    if session is not None and Hook.RUN_FOLDER in stage.kind.hooks:  # e.g. the league's pool
        build.module.use_run_folder(session.run.phase_dir(stage.index), stage.index)
    checkpoints = session.checkpoints(stage.index, stage.checkpoint, run_config(cfg)) if session else None

    pipeline = context.count > 1
    index = stage.index if pipeline else None
    if context.rank > 0:  # one MLflow run and one progress bar: rank 0's
        progress = build.callbacks.pop("progress", None)
        build.trainer_kwargs.update(enable_progress_bar=False,
                                    callbacks=[c for c in build.trainer_kwargs["callbacks"] if c is not progress])
        return fit_stage(build, cfg, logger=None, checkpoints=checkpoints, label=None)
    continue_id = _continued_mlflow_run(session, index, context.tracking)
    logger = make_mlflow_logger(
        cfg, master_seed=context.master_seed, run_dir=session.run.path if session else None,
        continue_run_id=continue_id, stage=(stage.index, stage.name) if pipeline else None,
        parent_run_id=context.parent_run_id, step_offset=context.step_offset,
    )
    if logger is not None:
        log_run_config(logger, cfg, master_seed=context.master_seed, log_artifact=context.tracking.log_config_artifact,
                       resumed=continue_id is not None)
        log.info("MLflow run %s in %s (experiment %r)", logger.run_id, context.tracking.uri,
                 context.tracking.experiment)
        if session is not None:
            session.record_mlflow_run(index, logger.run_id)
    label = f"{stage.index + 1}/{context.count} {stage.name}" if pipeline else None
    result = fit_stage(build, cfg, logger=logger, checkpoints=checkpoints, label=label)
    ranks = build.ranks() if build.ranks else None  # several learner processes: what each one drew
    if ranks and session is not None:
        session.record_ranks(stage.index, ranks)
    return result


def _pin_seed(cfg: DictConfig, master: int) -> DictConfig:
    """The stage's config with ``seed`` set to the run's master seed (what checkpoints record)."""
    with open_dict(cfg):
        cfg.seed = master
    return cfg


def _import_stage(plan: Plan, stage: Stage, session: RunSession, source: RunDirectory) -> dict:
    """``pipeline.start`` skips ``stage``: its gate (the one just before the start) and record
    come from ``source``, a finished run of the same experiment."""
    record = dict(name=stage.name, kind=stage.kind.name, metrics={}, steps=0, step_end=0, finished=_now(),
                  imported_from=str(source.path))
    if stage.name in _gates_needed(plan):
        copy_verified(gate_path(source, stage.name), gate_path(session.run, stage.name))
        log.info("%s: gate taken from %s", stage.label, source.path)
    if stage.index == plan.start - 1:
        done = read_done(source, stage.index) or {}
        record.update(metrics=done.get("metrics", {}), step_end=int(done.get("step_end", 0)))
    session.mark_done(stage.index, record)
    return record


def _gates_needed(plan: Plan) -> list[str]:
    """The stages before ``pipeline.start`` whose gates the stages that run read: the one just
    before the start, and any earlier one a transition names as its source or teacher."""
    names = {plan.stages[plan.start - 1].name} if plan.start > 0 else set()
    for stage in plan.stages[plan.start : plan.stop + 1]:
        transition = stage.typed["transition"]
        names.update(n for n in (transition.source, transition.teacher) if n is not None)
    skipped = [s.name for s in plan.stages[: plan.start]]
    return [name for name in skipped if name in names]


def _source_run(plan: Plan, session: RunSession | None) -> RunDirectory:
    """The run whose gates the stages before ``pipeline.start`` come from: ``pipeline.source``, or
    the newest run of ``pipeline.source_experiment`` (default: this experiment) that has them all."""
    if session is None:
        raise ConfigError("pipeline.start needs checkpoints; accepted: checkpoint=default")
    gates = [f"gates/{name}.pt" for name in _gates_needed(plan)]
    experiment = plan.source.experiment
    named = plan.source.run
    if named is not None:
        source = RunDirectory.open(named, setting="pipeline.source")
        missing = [g for g in gates if not (source.path / g).is_file()]
        if missing:
            raise ConfigError(f"pipeline.source={named} has no {missing[0]}; accepted: a run of experiment "
                              f"{experiment!r} whose stages {', '.join(_gates_needed(plan))} finished")
        return source
    source = find_latest_run(session.root, experiment=experiment, task=plan.identity.task, having=gates)
    if source is None:
        stage = plan.stages[plan.start - 1]
        raise ConfigError(
            f"pipeline.start={plan.stages[plan.start].name}: no run of experiment {experiment!r} under "
            f"{session.root} has {' and '.join(gates)}, which {stage.label} writes; run it first (python train.py "
            f"+experiment={experiment}) or name a run with pipeline.source=<run dir>"
        )
    return source


def _now() -> str:
    return datetime.now(UTC).isoformat()
