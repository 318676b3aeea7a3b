"""One record per learning-phase kind: validation, building and running all read it.

A *phase kind* is a learning algorithm (``ppo``, ``bc``, ``alphazero`` ...); a *stage* is one
position in an experiment's pipeline that runs a phase kind (``docs/architecture.md``). Adding a
kind is one package under ``meeple/phases/`` plus one line here.

Builders and runners are named as ``"module:function"`` and imported only when a stage of that
kind runs, so validating a config never imports a phase's heavy dependencies.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from omegaconf import DictConfig

from meeple.errors import ConfigError
from meeple.transport.address import is_loopback_address

# collector.type groups (meeple.data.collectors.COLLECTOR_TYPES; not imported: it needs torch).
IN_PROCESS = ("auto", "sync")
ALL_COLLECTORS = (*IN_PROCESS, "multisync", "ray")


class Hook(StrEnum):
    """What a stage's run does to a phase's module besides fitting it; a kind declares the
    hooks its module has (``PhaseKind.hooks``), the plan checks a config asks for no other,
    and the stage calls only those (``meeple.phases.hooks`` has their signatures)."""

    TEACHER = "teacher"  # set_teacher(checkpoint, file): a frozen teacher (transition.teacher)
    WARMUP = "warmup"  # set_warmup(epochs, start_fraction): the learning rate warms up (transition.warmup)
    REFERENCE = "reference"  # wants_reference(), set_reference_from_actor(): KL to the carried actor (phase.reference_kl)
    RUN_FOLDER = "run_folder"  # use_run_folder(folder, stage_index): files of its own in the run directory


@dataclass(frozen=True)
class PhaseKind:
    """``schema``: the typed ``phase`` node; ``check(cfg, phase)``: cross-field rules (ConfigError).

    Exactly one of ``build`` (a Lightning phase: ``build(cfg, typed, seeds) -> PhaseParts``) and
    ``run`` (a process-based phase: ``run(stage, context) -> dict[str, float]``) is set.
    """

    name: str
    schema: type
    check: Callable[[Any, Any], None]
    build: str | None = None
    run: str | None = None
    models: tuple[str, ...] = ()  # model `_target_`s the phase can build on (empty: it takes none)
    model_hint: str = ""  # a model= option that fits, for the error message
    # ... and any factory marked as building this kind (a plugin's: meeple.nets.kinds
    # .mark_actor_critic_factory), found by importing the model's `_target_` while validating.
    model_kind: str = ""
    distributed: bool = False  # trains on several learner processes (hardware.strategy=ddp)
    # collector.type values the phase honours; None: it collects nothing (collector= is unused)
    collectors: tuple[str, ...] | None = IN_PROCESS
    # its envs come from env_factory (so transport= may put them in an env server)
    remote_envs: bool = False
    hooks: frozenset[Hook] = frozenset()
    # Whether the phase keeps checkpoints and writes a gate (one that does not runs alone, never resumed).
    checkpoints: bool = True

    def __post_init__(self) -> None:
        if (self.build is None) == (self.run is None):
            raise TypeError(f"phase kind {self.name!r}: set exactly one of build= and run=")

    @property
    def is_lightning(self) -> bool:
        return self.build is not None

    def builder(self) -> Callable[..., Any]:
        return _resolve(self.build)

    def runner(self) -> Callable[..., Any]:
        return _resolve(self.run)


def _resolve(path: str) -> Callable[..., Any]:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def _kinds() -> dict[str, PhaseKind]:
    from meeple.nets.kinds import ACTOR_CRITIC
    from meeple.phases.alphazero.schema import AlphaZeroPhase, check_alphazero
    from meeple.phases.bc.schema import BCPhase, check_bc
    from meeple.phases.distill.schema import DistillPhase, check_distill
    from meeple.phases.dqn.schema import DQNPhase, check_dqn
    from meeple.phases.league.schema import LeaguePhase, check_league
    from meeple.phases.packed_ppo.schema import PackedPPOPhase, check_packed_ppo
    from meeple.phases.ppo.schema import PPOPhase, check_ppo

    actor_critic = ("meeple.nets.actor_critic.build_actor_critic", "meeple.nets.planes.build_planes_actor_critic")
    ppo_hooks = frozenset({Hook.WARMUP, Hook.REFERENCE})  # PPOModule's, and so every module built on it
    kinds = [
        PhaseKind("ppo", PPOPhase, check_ppo, build="meeple.phases.ppo.build:build_ppo", models=actor_critic,
                  model_hint="mlp", model_kind=ACTOR_CRITIC, distributed=True, collectors=ALL_COLLECTORS,
                  remote_envs=True, hooks=ppo_hooks),
        PhaseKind("packed_ppo", PackedPPOPhase, check_packed_ppo, build="meeple.phases.packed_ppo.build:build_packed_ppo",
                  models=("meeple.nets.packed_cnn.build_packed_cnn",), model_hint="packed_cnn",
                  hooks=frozenset({Hook.WARMUP})),
        PhaseKind("alphazero", AlphaZeroPhase, check_alphazero, build="meeple.phases.alphazero.build:build_alphazero",
                  models=("meeple.nets.az_resnet.build_az_resnet",), model_hint="az_resnet", distributed=True,
                  collectors=(*IN_PROCESS, "ray")),
        PhaseKind("bc", BCPhase, check_bc, build="meeple.phases.bc.build:build_bc", models=actor_critic,
                  model_hint="mlp", model_kind=ACTOR_CRITIC, distributed=True, collectors=None, remote_envs=True),
        PhaseKind("distill", DistillPhase, check_distill, build="meeple.phases.distill.build:build_distill",
                  models=actor_critic, model_hint="mlp", model_kind=ACTOR_CRITIC, collectors=ALL_COLLECTORS,
                  remote_envs=True, hooks=ppo_hooks | {Hook.TEACHER}),
        PhaseKind("league", LeaguePhase, check_league, build="meeple.phases.league.build:build_league",
                  models=actor_critic, model_hint="mlp", model_kind=ACTOR_CRITIC, collectors=(*IN_PROCESS, "ray"),
                  remote_envs=True, hooks=ppo_hooks | {Hook.RUN_FOLDER}),
        PhaseKind("dqn", DQNPhase, check_dqn, run="meeple.phases.dqn.run:run_dqn_stage", checkpoints=False),
    ]
    return {kind.name: kind for kind in kinds}


def phase_kind(name: Any) -> PhaseKind:
    """The record of ``phase.name``; an unknown name lists the accepted ones."""
    kinds = _kinds()
    if name not in kinds:
        raise ConfigError(f"phase.name={name!r} is not a phase kind; accepted: {', '.join(kinds)}")
    return kinds[name]


def phase_kinds() -> list[str]:
    return list(_kinds())


def validate(cfg: DictConfig) -> dict[str, Any]:
    """Check one stage's config; return its typed groups (``hardware``, ``phase``, ``transition``)."""
    from meeple.config.schema import Transition, check_hardware, check_transition, checked

    hardware = check_hardware(cfg)
    if cfg.get("phase") is None:
        raise ConfigError("config group 'phase' is missing; pick one with phase=<option>")
    kind = phase_kind(cfg.phase.get("name"))
    _check_distributed(hardware, kind)
    _check_collector(cfg, hardware, kind)
    _check_transport(cfg, kind)
    _check_model(cfg, kind)
    phase = checked(cfg, "phase", kind.schema)
    kind.check(cfg, phase)
    transition: Transition = checked(cfg, "transition", Transition)
    check_transition(transition)
    return {"hardware": hardware, "phase": phase, "transition": transition}


def _check_distributed(hardware: Any, kind: PhaseKind) -> None:
    from meeple.distributed import world_size

    if world_size(hardware) > 1 and not kind.distributed:
        accepted = ", ".join(k.name for k in _kinds().values() if k.distributed)
        raise ConfigError(
            f"hardware={hardware.name} runs {world_size(hardware)} learner processes (strategy=ddp), which "
            f"phase={kind.name} does not support; accepted: a single-process hardware profile (e.g. hardware=cpu), "
            f"or a phase that trains on several ({accepted})"
        )


def _check_transport(cfg: DictConfig, kind: PhaseKind) -> None:
    """``transport=`` other than inproc only for a phase whose envs it can serve (never
    silently unused, as ``collector=``)."""
    transport = cfg.get("transport") or {}
    ttype = transport.get("type", "inproc")
    if ttype == "inproc":
        return
    if kind.remote_envs:
        address = transport.get("address")
        if ttype == "http" and address and not is_loopback_address(str(address)):
            raise ConfigError(f"transport.address={address!r} for transport=http; accepted: 127.0.0.1:PORT or "
                              "localhost:PORT (servers bind the loopback interface only), or null")
        workers = (cfg.get("env") or {}).get("num_workers", 1)
        if transport.get("address") and isinstance(workers, int) and workers > 1:
            raise ConfigError(
                f"transport.address={transport.get('address')} with env.num_workers={workers}: a server you "
                "started hosts one env batch and one client drives it at a time, so the second collector "
                "worker would find it busy; accepted: env.num_workers=1, or transport.address=null (the run "
                "starts a server per worker)")
        return
    accepted = ", ".join(k.name for k in _kinds().values() if k.remote_envs)
    raise ConfigError(f"transport={ttype} is not used by phase={kind.name} (it builds its envs itself); "
                      f"accepted: leave transport= out (transport=inproc), or a phase that steps remote envs "
                      f"({accepted})")


def _check_collector(cfg: DictConfig, hardware: Any, kind: PhaseKind) -> None:
    """``collector=`` must be one the phase collects with (never silently unused), and Ray's
    options must fit the run."""
    from meeple.distributed import world_size

    node = cfg.get("collector") or {}
    ctype = node.get("type", "auto")
    if kind.collectors is not None and ctype not in kind.collectors:
        raise ConfigError(f"collector={ctype} is not one phase={kind.name} collects with; accepted: "
                          f"{', '.join('collector=' + c for c in kind.collectors)}")
    if ctype != "ray" or kind.collectors is None:
        return
    cpus = node.get("cpus_per_actor", 1)
    if isinstance(cpus, bool) or not isinstance(cpus, (int, float)) or cpus <= 0:
        raise ConfigError(f"collector.cpus_per_actor={cpus!r}; accepted: a number > 0 (Ray's logical CPUs per actor)")
    actors = node.get("actors")
    if actors is not None and (isinstance(actors, bool) or not isinstance(actors, int) or actors < 1):
        raise ConfigError(f"collector.actors={actors!r}; accepted: null or an integer >= 1")
    if world_size(hardware) > 1 and not node.get("address"):
        raise ConfigError(f"collector=ray with hardware={hardware.name} ({world_size(hardware)} learner processes) "
                          "needs a running cluster every rank joins: start one with `ray start --head`; accepted: "
                          "collector.address=auto or host:port")


def _check_model(cfg: DictConfig, kind: PhaseKind) -> None:
    """A model group that the phase cannot build on names the group to change with it."""
    target = (cfg.get("model") or {}).get("_target_")
    if not kind.models or target in kind.models or (kind.model_kind and _declared_kind(target) == kind.model_kind):
        return
    marked = f" or a factory marked as building {kind.model_kind!r} models" if kind.model_kind else ""
    raise ConfigError(
        f"model {target!r} does not fit phase={kind.name}; accepted: a model built by "
        f"{' or '.join(kind.models)}{marked}: change model= with phase= (e.g. model={kind.model_hint})"
    )


def _declared_kind(target: Any) -> str | None:
    """The model kind a plugin's factory declares (``meeple.nets.kinds.MODEL_KIND_ATTR``), or None.

    The core's factories are listed in ``PhaseKind.models`` and never imported here: a config
    mistake with a core model stays a one-line error without importing torch."""
    if not isinstance(target, str) or "." not in target or target.startswith("meeple."):
        return None
    from meeple.nets.kinds import MODEL_KIND_ATTR

    module, _, name = target.rpartition(".")
    try:
        factory = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as err:
        raise ConfigError(f"model._target_={target!r} cannot be imported ({err}); accepted: an importable "
                          "model factory, e.g. from an installed plugin") from None
    return getattr(factory, MODEL_KIND_ATTR, None)
