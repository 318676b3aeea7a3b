"""Typed schema of conf/phase/ppo.yaml and its cross-field checks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig

from meeple.config.schema import require
from meeple.errors import ConfigError
from meeple.phases.aux import AUX_LOSSES
from meeple.phases.lr_groups import LRGroup


@dataclass
class Eval:
    every_n_rollouts: int = 10
    episodes: int = 20
    max_steps: int = 1000


@dataclass
class Stop:
    eval_return: float | None = None


@dataclass
class PPOLoss:
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_epsilon: float = 0.2
    entropy_coef: float = 0.01
    critic_coef: float = 0.5
    normalize_advantage: bool = True


@dataclass
class ReferenceKL:
    coef: float = 0.0  # beta_0 in loss += beta_t * KL(pi || pi_ref); 0: off
    # beta_t falls linearly to 0 over this fraction of the rollouts; null: beta_0 throughout (a
    # long fine-tune whose anchor fades drifts from the clone: docs/rl_diagnostics.md)
    anneal_fraction: float | None = 0.3


@dataclass
class Diagnostics:
    every_n_rollouts: int = 0  # gradient norms per loss term and parameter group (docs); 0: off


@dataclass
class PPOAux:
    """One auxiliary loss: the actor's ``output`` logits (a key its forward writes) against the
    rollout's ``target`` key, passed through ``transform`` first when given (a `_target_` node of
    a function, ``_partial_: true``: e.g. labels computed from privileged planes the policy does
    not read), weighted by ``coef``."""

    output: str = "???"
    target: str = "???"
    loss: str = "bce"  # ce (class index target) | bce (0/1 target per output)
    coef: float = 1.0
    transform: Any = None


@dataclass
class PPOPhase:
    name: str
    module: Any
    optimizer: Any
    rollout_steps: int
    total_frames: int
    ppo_epochs: int
    minibatch_size: int
    lr: float
    anneal_lr: bool
    max_grad_norm: float | None
    loss: PPOLoss = field(default_factory=PPOLoss)
    eval: Eval = field(default_factory=Eval)
    stop: Stop = field(default_factory=Stop)
    reference_kl: ReferenceKL = field(default_factory=ReferenceKL)
    diagnostics: Diagnostics = field(default_factory=Diagnostics)
    lr_groups: dict[str, LRGroup] = field(default_factory=dict)  # name -> {params: [globs], lr}
    critic_warmup_rollouts: int = 0  # first rollouts train the value head only (policy frozen)
    aux: dict[str, PPOAux] = field(default_factory=dict)  # name -> auxiliary loss on the actor's outputs


def check_ppo(cfg: DictConfig, phase: PPOPhase) -> None:
    for name in ("rollout_steps", "total_frames", "ppo_epochs", "minibatch_size"):
        require(getattr(phase, name) >= 1, f"phase.{name}", getattr(phase, name), "an integer >= 1")
    require(phase.lr > 0, "phase.lr", phase.lr, "a float > 0")
    require(0 < phase.loss.gamma <= 1, "phase.loss.gamma", phase.loss.gamma, "a float in (0, 1]")
    require(0 <= phase.loss.gae_lambda <= 1, "phase.loss.gae_lambda", phase.loss.gae_lambda, "a float in [0, 1]")
    require(phase.loss.clip_epsilon > 0, "phase.loss.clip_epsilon", phase.loss.clip_epsilon, "a float > 0")
    require(phase.max_grad_norm is None or phase.max_grad_norm > 0, "phase.max_grad_norm",
             phase.max_grad_norm, "null or a float > 0")
    require(phase.reference_kl.coef >= 0, "phase.reference_kl.coef", phase.reference_kl.coef, "a float >= 0")
    anneal = phase.reference_kl.anneal_fraction
    require(anneal is None or 0 < anneal <= 1, "phase.reference_kl.anneal_fraction", anneal,
            "a float in (0, 1], or null (no annealing)")
    require(phase.critic_warmup_rollouts >= 0, "phase.critic_warmup_rollouts", phase.critic_warmup_rollouts,
            "an integer >= 0 (0: off)")
    require(phase.diagnostics.every_n_rollouts >= 0, "phase.diagnostics.every_n_rollouts",
            phase.diagnostics.every_n_rollouts, "an integer >= 0 (0: off)")
    for name, aux in phase.aux.items():
        require(aux.loss in AUX_LOSSES, f"phase.aux.{name}.loss", aux.loss, ", ".join(AUX_LOSSES))
        require(aux.coef >= 0, f"phase.aux.{name}.coef", aux.coef, "a float >= 0")
    for name in ("every_n_rollouts", "episodes", "max_steps"):
        require(getattr(phase.eval, name) >= 1, f"phase.eval.{name}", getattr(phase.eval, name), "an integer >= 1")

    env = cfg.get("env")
    if env is None or "backend" not in env:
        raise ConfigError("env.backend is missing; choose an env with env=<name>")
    for key in ("num_envs", "num_workers"):
        value = env.get(key)
        require(isinstance(value, int) and not isinstance(value, bool), f"env.{key}", value, "an integer >= 1")
    num_envs, num_workers = int(env.num_envs), int(env.num_workers)
    require(num_envs >= 1, "env.num_envs", num_envs, "an integer >= 1")
    require(num_workers >= 1, "env.num_workers", num_workers, "an integer >= 1")
    actors = (cfg.get("collector") or {}).get("actors")  # collector=ray: one Ray actor per env worker
    if actors is not None and actors != num_workers:
        raise ConfigError(f"collector.actors={actors}, but phase={phase.name} runs one Ray actor per env worker "
                          f"(env.num_workers={num_workers}); accepted: collector.actors=null or "
                          f"env.num_workers={actors}")
    frames = num_envs * num_workers * phase.rollout_steps
    if phase.minibatch_size > frames:
        raise ConfigError(
            f"phase.minibatch_size={phase.minibatch_size} is larger than one rollout "
            f"(env.num_envs * env.num_workers * phase.rollout_steps = {num_envs}*{num_workers}*"
            f"{phase.rollout_steps} = {frames}); accepted: 1..{frames}"
        )
    if phase.total_frames < frames:
        raise ConfigError(
            f"phase.total_frames={phase.total_frames} is less than one rollout ({frames} frames); "
            f"accepted: >= {frames}"
        )
