"""From the composed config to the stages of a run, each a single-phase config, validated.

A run is a pipeline of stages. ``pipeline: null`` (every single-phase recipe) is a pipeline of
one stage built from the root's ``phase`` and ``transition``. A multi-phase recipe lists its
stages under ``pipeline.stages.<name>`` (each with a ``phase``, a ``transition`` and optionally
any other root key it changes, e.g. ``model`` or ``checkpoint``) and their order in
``pipeline.order``. Every stage's config is the root with those keys replaced (a ``debug=<mode>``
run's sizes are already in: Hydra composes them, ``conf/train.yaml``). All stages are validated
before any work starts, each once.

Besides the stages, the plan holds the run's typed records (``meeple.config.run``): its identity,
checkpointing and tracking. The run session and the runner read those, never the config.

Words: a *phase kind* is a learning algorithm (``phase.name``: ppo, bc, ...); a *stage* is a
position in the pipeline (index, name) that runs one phase kind.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from meeple.config.run import (
    CheckpointPolicy,
    RunIdentity,
    TrackingPlan,
    checkpoint_policy,
    run_identity,
    tracking_plan,
)
from meeple.config.schema import gate_conditions
from meeple.errors import ConfigError
from meeple.phases.registry import Hook, PhaseKind, phase_kind, validate

STAGE_KEYS = ("phase", "transition")  # every stage has these; any other key patches the root


@dataclass
class Stage:
    index: int  # position in the pipeline: seeds (spawn_key), folders phase{index}/
    name: str  # stage name: gates/<name>.pt, MLflow child run tag
    cfg: DictConfig  # a single-phase config (no `pipeline` key)
    kind: PhaseKind
    typed: dict[str, Any]  # validated hardware / phase / transition
    checkpoint: CheckpointPolicy | None = None  # None: the run keeps no checkpoints

    @property
    def label(self) -> str:
        return f"phase {self.index} ({self.name})"


@dataclass(frozen=True)
class SourceRun:
    """Where the gates of the stages before ``pipeline.start`` come from: ``run`` (a run
    directory), or the newest run of ``experiment`` that has them."""

    run: str | None
    experiment: str


@dataclass
class Plan:
    stages: list[Stage]
    start: int  # first stage this invocation runs (pipeline.start); earlier ones come from a gate
    stop: int  # last stage it runs (pipeline.stop), inclusive
    identity: RunIdentity
    checkpoints: CheckpointPolicy | None  # the root's (None: no checkpoints, no run directory)
    tracking: TrackingPlan
    source: SourceRun
    in_sweep: bool  # a sweep's trial (it cannot start learner processes of its own)

    @property
    def is_pipeline(self) -> bool:
        return len(self.stages) > 1


def plan_run(cfg: DictConfig) -> Plan:
    """The validated stages of ``cfg`` and its run records (raises ConfigError naming the stage
    and key)."""
    identity, checkpoints = run_identity(cfg), checkpoint_policy(cfg)
    pipeline = cfg.get("pipeline")
    if pipeline is None:
        stages = [_stage(cfg, 0, str(OmegaConf.select(cfg, "phase.name")), {}, count=1, keeps=checkpoints)]
        order, start, stop = [stages[0].name], 0, 0
    else:
        order = _order(pipeline)
        stages = [_stage(cfg, i, name, pipeline.stages[name], count=len(order), keeps=checkpoints)
                  for i, name in enumerate(order)]
        start = _position(order, pipeline.get("start"), "pipeline.start", default=0)
        stop = _position(order, pipeline.get("stop"), "pipeline.stop", default=len(order) - 1)
        if only := pipeline.get("only"):
            start = stop = _position(order, only, "pipeline.only", default=0)
    _check_starts(stages)
    if start > stop:
        raise ConfigError(f"pipeline.start={order[start]!r} comes after pipeline.stop={order[stop]!r}; "
                          f"accepted: a start at or before the stop in {order}")
    _check_collector_used(cfg, stages[start:stop + 1])
    _check_checkpoints(identity, checkpoints, stages)
    named = None if pipeline is None else pipeline.get("source")
    source = SourceRun(run=None if named is None else str(named),
                       experiment=str((pipeline or {}).get("source_experiment") or identity.experiment))
    return Plan(stages, start, stop, identity, checkpoints, tracking_plan(cfg), source,
                in_sweep=OmegaConf.select(cfg, "trial.number") is not None)


def _check_checkpoints(identity: RunIdentity, checkpoints: CheckpointPolicy | None, stages: list[Stage]) -> None:
    """What needs checkpoints has them, and a phase that keeps none is not asked to resume or to
    hand a gate on."""
    if checkpoints is None:
        if identity.resume:
            raise ConfigError("resume=true needs checkpoints; accepted: checkpoint=default (not checkpoint=none)")
        if len(stages) > 1:
            raise ConfigError(f"a pipeline ({' -> '.join(s.name for s in stages)}) needs checkpoints: each stage "
                              "starts from the previous stage's gate file; accepted: checkpoint=default (not "
                              "checkpoint=none)")
    for stage in stages:
        if stage.kind.checkpoints:
            continue
        if len(stages) > 1:
            raise ConfigError(f"phase={stage.kind.name} runs alone for now (it writes no checkpoint or gate a next "
                              "stage could start from); accepted: a single-stage experiment")
        if identity.resume:
            raise ConfigError(f"phase={stage.kind.name} has no checkpoints to resume from yet; accepted: "
                              "resume=false")


def _check_collector_used(cfg: DictConfig, running: list[Stage]) -> None:
    """A ``collector=`` chosen for a run none of whose stages collects (BC learns from logs) would
    be silently unused (each stage's own collector check skips such stages)."""
    ctype = (cfg.get("collector") or {}).get("type", "auto")
    if ctype == "auto" or any(stage.kind.collectors is not None for stage in running):
        return
    phases = ", ".join(sorted({f"phase={stage.kind.name}" for stage in running}))
    raise ConfigError(f"collector={ctype}: no stage this run trains collects ({phases} learns from logs, "
                      "so the collector would go unused); accepted: leave collector= out, or run a stage that "
                      "collects (e.g. ppo, alphazero, league)")


def _check_starts(stages: list[Stage]) -> None:
    """What each stage takes from the one before it must exist (checked before any work)."""
    for stage in stages:
        transition = stage.typed["transition"]
        gates = gate_conditions(transition) if stage.index == 0 else []
        if stage.index == 0 and (transition.carry or gates):
            what = [f"carry={list(transition.carry)}"] if transition.carry else []
            what += [f"gate on {', '.join(g.metric for g in gates)}"] if gates else []
            raise ConfigError(f"{stage.label} is the first stage: its transition ({transition.name}; "
                              f"{'; '.join(what)}) has no previous stage to carry weights from or gate on; "
                              "accepted: a transition that carries nothing and has no gate (transition=none, "
                              "and no transition.gate from the experiment or its debug sizes)")
        earlier = [s.name for s in stages[: stage.index]]
        for key in ("source", "teacher"):
            name = getattr(transition, key)
            if name is not None and name not in earlier:
                raise ConfigError(f"{stage.label}: transition.{key}={name!r} is not an earlier stage; accepted: "
                                  f"{', '.join(earlier) or '(none: this is the first stage)'}")
        hooks = stage.kind.hooks
        if Hook.REFERENCE in hooks and stage.typed["phase"].reference_kl.coef > 0 and "actor" not in transition.carry:
            raise ConfigError(f"{stage.label}: phase.reference_kl.coef > 0 needs a stage before it whose actor the "
                              "transition carries (transition.carry: [actor, ...]); accepted: coef 0 here")
        if transition.teacher is not None and Hook.TEACHER not in hooks:
            raise ConfigError(f"{stage.label}: transition.teacher={transition.teacher!r}: phase={stage.kind.name} "
                              "takes no teacher; accepted: null, or a distillation phase (phase=distill)")
        if transition.warmup.epochs > 0 and Hook.WARMUP not in hooks:
            raise ConfigError(f"{stage.label}: transition.warmup.epochs={transition.warmup.epochs}: "
                              f"phase={stage.kind.name} has no learning-rate warm-up; accepted: 0")


def _order(pipeline: DictConfig) -> list[str]:
    stages = pipeline.get("stages")
    if not stages:
        raise ConfigError("pipeline.stages is empty; accepted: a mapping of stage name -> {phase, transition, ...}")
    order = list(pipeline.get("order") or [])
    unknown = [name for name in order if name not in stages]
    if not order or unknown or len(set(order)) != len(order):
        raise ConfigError(f"pipeline.order={order}; accepted: each of {list(stages)} once, in the order they run")
    missing = [name for name in stages if name not in order]
    if missing:
        raise ConfigError(f"pipeline.stages.{missing[0]} is not in pipeline.order={order}; add it or remove it")
    return order


def _position(order: list[str], name: Any, key: str, *, default: int) -> int:
    if name is None:
        return default
    if name not in order:
        raise ConfigError(f"{key}={name!r} is not a stage of this pipeline; accepted: {', '.join(order)}")
    return order.index(name)


def _stage(cfg: DictConfig, index: int, name: str, node: DictConfig | dict, *, count: int,
           keeps: CheckpointPolicy | None) -> Stage:
    """Stage ``index`` of ``count``, validated; it keeps checkpoints when the run does (``keeps``),
    with its own values of them."""
    stage_cfg = stage_config(cfg, name, node)
    where = f"stage {name!r}: " if cfg.get("pipeline") is not None else ""
    try:
        typed = validate(stage_cfg)
        # A pipeline's stage copies its best checkpoint to gates/<stage>.pt for the next one.
        checkpoint = checkpoint_policy(stage_cfg, gate=name if index < count - 1 else None, enabled=keeps is not None)
    except ConfigError as err:
        raise ConfigError(f"{where}{err}") from None
    return Stage(index=index, name=name, cfg=stage_cfg, kind=phase_kind(stage_cfg.phase.name), typed=typed,
                 checkpoint=checkpoint)


def stage_config(cfg: DictConfig, name: str, node: DictConfig | dict) -> DictConfig:
    """The single-phase config of stage ``name``: the root patched by ``node``."""
    stage = copy.deepcopy(cfg)
    with open_dict(stage):
        if stage.get("pipeline") is not None:
            for key in STAGE_KEYS:
                if key not in node:
                    raise ConfigError(f"pipeline.stages.{name}.{key} is missing; accepted: a {key} config "
                                      f"(e.g. `- /{key}@pipeline.stages.{name}.{key}: <option>` in the recipe)")
            for key, value in node.items():
                if key in STAGE_KEYS or not isinstance(value, DictConfig) or stage.get(key) is None:
                    stage[key] = value
                else:  # model, env, checkpoint, ...: this stage's values over the root's
                    stage[key] = OmegaConf.merge(stage[key], value)
            stage.pipeline = None
    return stage
