"""From the composed config to the stages of a run, each a single-phase config, validated.

A run is a pipeline of stages. ``pipeline: null`` (every single-phase recipe) is a pipeline of
one stage built from the root's ``phase`` and ``transition``. A multi-phase recipe lists its
stages under ``pipeline.stages.<name>`` (each with a ``phase``, a ``transition`` and optionally
any other root key it changes, e.g. ``model`` or ``checkpoint``) and their order in
``pipeline.order``. Every stage's config is the root with those keys replaced, then the phase's
``debug.<mode>`` sizes merged in (``debug=tiny``), then the user's command-line values applied
again so that they win. All stages are validated before any work starts.

Words: a *phase kind* is a learning algorithm (``phase.name``: ppo, bc, ...); a *stage* is a
position in the pipeline (index, name) that runs one phase kind.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from meeple.config.overrides import command_line_values, searched_keys
from meeple.config.schema import gate_conditions
from meeple.errors import ConfigError
from meeple.phases.registry import PhaseKind, phase_kind, validate

STAGE_KEYS = ("phase", "transition")  # every stage has these; any other key patches the root


@dataclass
class Stage:
    index: int  # position in the pipeline: seeds (spawn_key), folders phase{index}/
    name: str  # stage name: gates/<name>.pt, MLflow child run tag
    cfg: DictConfig  # a single-phase config (no `pipeline` key), debug sizes applied
    kind: PhaseKind
    typed: dict[str, Any]  # validated hardware / phase / transition

    @property
    def label(self) -> str:
        return f"phase {self.index} ({self.name})"


@dataclass
class Plan:
    stages: list[Stage]
    start: int  # first stage this invocation runs (pipeline.start); earlier ones come from a gate
    stop: int  # last stage it runs (pipeline.stop), inclusive

    @property
    def is_pipeline(self) -> bool:
        return len(self.stages) > 1


def plan_run(cfg: DictConfig) -> Plan:
    """The validated stages of ``cfg`` (raises ConfigError naming the stage and key)."""
    _check_run_keys(cfg)
    pipeline = cfg.get("pipeline")
    if pipeline is None:
        stages = [_stage(cfg, 0, str(OmegaConf.select(cfg, "phase.name")), {})]
        _check_starts(stages)
        _check_collector_used(cfg, stages)
        return Plan(stages, 0, 0)
    order = _order(pipeline)
    stages = [_stage(cfg, i, name, pipeline.stages[name]) for i, name in enumerate(order)]
    start = _position(order, pipeline.get("start"), "pipeline.start", default=0)
    stop = _position(order, pipeline.get("stop"), "pipeline.stop", default=len(order) - 1)
    if only := pipeline.get("only"):
        start = stop = _position(order, only, "pipeline.only", default=0)
    _check_starts(stages)
    if start > stop:
        raise ConfigError(f"pipeline.start={order[start]!r} comes after pipeline.stop={order[stop]!r}; "
                          f"accepted: a start at or before the stop in {order}")
    _check_collector_used(cfg, stages[start:stop + 1])
    return Plan(stages, start, stop)


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


def _check_run_keys(cfg: DictConfig) -> None:
    seed = cfg.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63):
        raise ConfigError(f"seed={seed!r} is not allowed; accepted: null (drawn from os.urandom) or an integer "
                          "in [0, 2**63)")
    for key in ("resume",):
        if not isinstance(cfg.get(key), bool):
            raise ConfigError(f"{key}={cfg.get(key)!r} is not allowed; accepted: true, false")
    ckpt = cfg.get("checkpoint") or {}
    if ckpt.get("enabled"):
        for key in ("keep", "every_n_rollouts"):
            value = ckpt.get(key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"checkpoint.{key}={value!r} is not allowed; accepted: an integer >= 1")
        interval = ckpt.get("min_interval_s", 0.0)
        if isinstance(interval, bool) or not isinstance(interval, int | float) or not interval >= 0:
            raise ConfigError(f"checkpoint.min_interval_s={interval!r} is not allowed; accepted: a number of "
                              "seconds >= 0")
        if ckpt.get("mode") not in ("max", "min"):
            raise ConfigError(f"checkpoint.mode={ckpt.get('mode')!r} is not allowed; accepted: max, min")


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
        kl = getattr(stage.typed["phase"], "reference_kl", None)
        if kl is not None and kl.coef > 0 and "actor" not in transition.carry:
            raise ConfigError(f"{stage.label}: phase.reference_kl.coef > 0 needs a stage before it whose actor the "
                              "transition carries (transition.carry: [actor, ...]); accepted: coef 0 here")


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


def _stage(cfg: DictConfig, index: int, name: str, node: DictConfig | dict) -> Stage:
    stage_cfg = stage_config(cfg, name, node)
    where = f"stage {name!r}: " if cfg.get("pipeline") is not None else ""
    try:
        typed = validate(stage_cfg)
    except ConfigError as err:
        raise ConfigError(f"{where}{err}") from None
    return Stage(index=index, name=name, cfg=stage_cfg, kind=phase_kind(stage_cfg.phase.name), typed=typed)


def stage_config(cfg: DictConfig, name: str, node: DictConfig | dict) -> DictConfig:
    """The single-phase config of stage ``name``: the root patched by ``node``, debug sizes in."""
    stage = copy.deepcopy(cfg)
    with open_dict(stage):
        if stage.get("pipeline") is not None:
            for key in STAGE_KEYS:
                if key not in node:
                    raise ConfigError(f"pipeline.stages.{name}.{key} is missing; accepted: a {key} config "
                                      f"(e.g. `- /{key}@pipeline.stages.{name}.{key}: <option>` in the recipe)")
            for key, value in node.items():
                if key == "debug":
                    continue  # the stage's own debug sizes, below
                if key in STAGE_KEYS or not isinstance(value, DictConfig) or stage.get(key) is None:
                    stage[key] = value
                else:  # model, env, checkpoint, ...: this stage's values over the root's
                    stage[key] = OmegaConf.merge(stage[key], value)
            stage.pipeline = None
        _apply_debug_sizes(stage, name, node.get("debug") if node else None)
    return stage


def _apply_debug_sizes(stage: DictConfig, name: str, stage_sizes: DictConfig | None) -> None:
    """Under ``debug=<mode>``: the phase's ``debug.<mode>`` patch, then the stage's (a pipeline
    may e.g. lower a gate), then the command line's values again."""
    phase = stage.get("phase")
    if phase is None:
        return
    sizes = phase.get("debug")
    mode = stage.get("debug_mode")
    with open_dict(phase):
        phase.pop("debug", None)  # not a hyperparameter: neither logged nor checkpointed
    if not mode:
        return
    patches = [(f"phase.debug.{mode}", (sizes or {}).get(mode)),
               (f"pipeline.stages.{name}.debug.{mode}", (stage_sizes or {}).get(mode))]
    if all(patch is None for _, patch in patches):
        return
    for where, patch in patches:
        for key, value in (patch or {}).items():
            if stage.get(key) is None:
                raise ConfigError(f"{where}.{key}: the run has no {key!r} to resize")
            stage[key] = OmegaConf.merge(stage[key], value)
    # The user's values win over debug sizes; a search's draws do not (a debug run checks that
    # every trial runs: a drawn minibatch of 512 cannot fit a 32-frame debug rollout).
    searched = searched_keys()
    for key, value in command_line_values():
        if key in searched:
            continue
        key = _stage_key(key, name)
        if key is not None and _has_parent(stage, key):
            OmegaConf.update(stage, key, value, merge=False, force_add=True)


def _stage_key(key: str, name: str) -> str | None:
    """A command-line key as seen from stage ``name`` (None: it belongs to another stage)."""
    prefix = "pipeline.stages."
    if not key.startswith(prefix):
        return key
    stage, _, rest = key[len(prefix):].partition(".")
    return rest if stage == name and rest else None


def _has_parent(stage: DictConfig, key: str) -> bool:
    if "." not in key:
        return True
    return isinstance(OmegaConf.select(stage, key.rsplit(".", 1)[0], default=None), DictConfig)
