"""Typed schemas for the config groups where a mistake is costly.

``validate(cfg)`` runs before any work: it checks each costly group against its
dataclass (unknown keys, wrong types), then cross-field rules, and raises one
:class:`~meeple.errors.ConfigError` naming the key and what is accepted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from meeple.errors import ConfigError
from meeple.phases.bc.schema import BCPhase, check_bc  # temporary: until the phase registry

PRECISIONS = ("32-true", "32", "16-mixed", "bf16-mixed", "bf16-true", "16-true", "64-true")
ACCELERATORS = ("cpu", "cuda", "mps", "auto")
MATMUL_PRECISIONS = ("highest", "high", "medium")


@dataclass
class Hardware:
    name: str
    accelerator: str
    devices: int
    precision: str
    compile: bool
    matmul_precision: str
    torch_threads: int
    num_envs: int
    env_workers: int
    inference_batch: int
    replay_buffer_size: int


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


@dataclass
class PackedPPOLoss(PPOLoss):
    max_importance_weight: float = 2.0  # truncation of pi_prox / mu in the decoupled objective


@dataclass
class PackedStop:
    success_rate: float | None = None


@dataclass
class PackedPPOPhase(PPOPhase):
    """PPO on a packed-frame env (meeple.data.packed_rollout): sync or async double-buffered."""

    mode: str = "sync"
    max_policy_lag: int = 1
    loss: PackedPPOLoss = field(default_factory=PackedPPOLoss)
    stop: PackedStop = field(default_factory=PackedStop)


@dataclass
class AZGate:
    games: int = 20
    threshold: float = 0.55
    num_simulations: int = 64
    opening_moves: int = 4


@dataclass
class AZEval:
    every_n_iterations: int = 1
    agent_simulations: int = 64
    mcts_games: int = 10
    mcts_opponent_simulations: int = 200
    solver_games: int = 10
    mcts_positions: int = 100
    benchmark_dir: str | None = None


@dataclass
class AlphaZeroPhase:
    name: str
    module: Any
    optimizer: Any
    game: str
    iterations: int
    games_per_iteration: int
    train_steps: int
    batch_size: int
    replay_size: int
    min_replay: int
    augment_mirror: bool
    lr: float
    weight_decay: float
    value_coef: float
    max_grad_norm: float | None
    selfplay: dict[str, Any]
    gate: AZGate = field(default_factory=AZGate)
    eval: AZEval = field(default_factory=AZEval)


@dataclass
class Transition:
    name: str
    carry_weights: bool
    reset_optimizer: bool


@dataclass
class TargetUpdate:
    kind: str = "soft"  # soft | hard
    tau: float = 0.01  # soft: theta' <- (1 - tau) theta' + tau theta after every update
    hard_interval: int = 500  # hard: copy theta -> theta' every this many updates


@dataclass
class Exploration:
    eps_init: float = 1.0
    eps_end: float = 0.05
    annealing_steps: int = 20_000  # env steps of linear decay


@dataclass
class DQNEval:
    episodes: int = 20


@dataclass
class DQNPhase:
    """Independent DQN learners (meeple.multiagent): one learner process per agent, one actor."""

    name: str
    optimizer: Any
    total_env_steps: int
    learning_starts: int
    batch_size: int
    buffer_size: int
    updates_per_step: float
    publish_interval: int
    sync_interval: int
    write_interval: int
    lr: float
    max_grad_norm: float | None
    gamma: float
    double_dqn: bool
    loss_function: str
    hidden: list[int]
    learner_device: str
    stop_timeout_s: float
    report_interval: int
    target_update: TargetUpdate = field(default_factory=TargetUpdate)
    exploration: Exploration = field(default_factory=Exploration)
    eval: DQNEval = field(default_factory=DQNEval)


PHASE_SCHEMAS: dict[str, type] = {
    "ppo": PPOPhase, "packed_ppo": PackedPPOPhase, "alphazero": AlphaZeroPhase, "dqn": DQNPhase,
    "bc": BCPhase,
}


def _checked(cfg: DictConfig, key: str, schema: type) -> Any:
    """The group as a typed object; unknown keys and bad types become ConfigError."""
    node = cfg.get(key)
    if node is None:
        raise ConfigError(f"config group {key!r} is missing; pick one with {key}=<option>")
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), OmegaConf.to_container(node, resolve=True))
        return OmegaConf.to_object(merged)
    except OmegaConfBaseException as err:
        where = f"{key}.{err.full_key}" if getattr(err, "full_key", None) else key
        accepted = ", ".join(f.name for f in schema.__dataclass_fields__.values())
        msg = str(err).splitlines()[0]
        raise ConfigError(f"{where}: {msg} (accepted keys of {key}: {accepted})") from None


def _require(ok: bool, key: str, value: Any, accepted: str) -> None:
    if not ok:
        raise ConfigError(f"{key}={value!r} is not allowed; accepted: {accepted}")


def validate(cfg: DictConfig) -> dict[str, Any]:
    """Check the composed config; return the typed groups (``hardware``, ``phase``, ``transition``)."""
    hw: Hardware = _checked(cfg, "hardware", Hardware)
    _require(hw.accelerator in ACCELERATORS, "hardware.accelerator", hw.accelerator, ", ".join(ACCELERATORS))
    _require(hw.precision in PRECISIONS, "hardware.precision", hw.precision, ", ".join(PRECISIONS))
    _require(
        hw.matmul_precision in MATMUL_PRECISIONS, "hardware.matmul_precision", hw.matmul_precision,
        ", ".join(MATMUL_PRECISIONS),
    )
    for name in ("devices", "torch_threads", "num_envs", "env_workers", "inference_batch"):
        _require(getattr(hw, name) >= 1, f"hardware.{name}", getattr(hw, name), "an integer >= 1")

    phase_name = cfg.get("phase", {}).get("name")
    if phase_name not in PHASE_SCHEMAS:
        raise ConfigError(f"phase.name={phase_name!r}; accepted: {', '.join(PHASE_SCHEMAS)}")
    phase = _checked(cfg, "phase", PHASE_SCHEMAS[phase_name])
    transition: Transition = _checked(cfg, "transition", Transition)
    checks = {"ppo": _check_ppo, "packed_ppo": _check_ppo, "alphazero": _check_alphazero, "dqn": _check_dqn,
              "bc": check_bc}
    checks[phase_name](cfg, phase)
    return {"hardware": hw, "phase": phase, "transition": transition}


def _check_ppo(cfg: DictConfig, phase: PPOPhase) -> None:
    for name in ("rollout_steps", "total_frames", "ppo_epochs", "minibatch_size"):
        _require(getattr(phase, name) >= 1, f"phase.{name}", getattr(phase, name), "an integer >= 1")
    _require(phase.lr > 0, "phase.lr", phase.lr, "a float > 0")
    _require(0 < phase.loss.gamma <= 1, "phase.loss.gamma", phase.loss.gamma, "a float in (0, 1]")
    _require(0 <= phase.loss.gae_lambda <= 1, "phase.loss.gae_lambda", phase.loss.gae_lambda, "a float in [0, 1]")
    _require(phase.loss.clip_epsilon > 0, "phase.loss.clip_epsilon", phase.loss.clip_epsilon, "a float > 0")
    _require(phase.max_grad_norm is None or phase.max_grad_norm > 0, "phase.max_grad_norm",
             phase.max_grad_norm, "null or a float > 0")
    if isinstance(phase, PackedPPOPhase):
        _require(phase.mode in ("sync", "async"), "phase.mode", phase.mode, "sync, async")
        _require(phase.max_policy_lag in (0, 1), "phase.max_policy_lag", phase.max_policy_lag,
                 "0 or 1 (two rollout buffers)")
        _require(phase.loss.max_importance_weight >= 1, "phase.loss.max_importance_weight",
                 phase.loss.max_importance_weight, "a float >= 1")
    for name in ("every_n_rollouts", "episodes", "max_steps"):
        _require(getattr(phase.eval, name) >= 1, f"phase.eval.{name}", getattr(phase.eval, name), "an integer >= 1")

    env = cfg.get("env")
    if env is None or "backend" not in env:
        raise ConfigError("env.backend is missing; choose an env with env=<name>")
    num_envs, num_workers = int(env.num_envs), int(env.num_workers)
    _require(num_envs >= 1, "env.num_envs", num_envs, "an integer >= 1")
    _require(num_workers >= 1, "env.num_workers", num_workers, "an integer >= 1")
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


def _check_alphazero(cfg: DictConfig, phase: AlphaZeroPhase) -> None:
    from meeple.phases.alphazero import GAMES

    _require(phase.game in GAMES, "phase.game", phase.game, ", ".join(GAMES))
    for name in ("iterations", "games_per_iteration", "train_steps", "batch_size", "replay_size"):
        _require(getattr(phase, name) >= 1, f"phase.{name}", getattr(phase, name), "an integer >= 1")
    _require(0 <= phase.min_replay <= phase.replay_size, "phase.min_replay", phase.min_replay,
             f"an integer in [0, phase.replay_size={phase.replay_size}]")
    _require(phase.lr > 0, "phase.lr", phase.lr, "a float > 0")
    _require(phase.weight_decay >= 0, "phase.weight_decay", phase.weight_decay, "a float >= 0")
    _require(phase.max_grad_norm is None or phase.max_grad_norm > 0, "phase.max_grad_norm",
             phase.max_grad_norm, "null or a float > 0")
    _require(phase.gate.games >= 0, "phase.gate.games", phase.gate.games, "an integer >= 0 (0: accept every candidate)")
    _require(0 < phase.gate.threshold <= 1, "phase.gate.threshold", phase.gate.threshold, "a float in (0, 1]")
    _require(phase.gate.num_simulations >= 1, "phase.gate.num_simulations", phase.gate.num_simulations,
             "an integer >= 1")
    _require(phase.eval.every_n_iterations >= 1, "phase.eval.every_n_iterations", phase.eval.every_n_iterations,
             "an integer >= 1")
    accepted = _selfplay_options()
    unknown = sorted(set(phase.selfplay) - accepted)
    if unknown:
        raise ConfigError(f"phase.selfplay.{unknown[0]} is not a self-play engine option; accepted: "
                          f"{', '.join(sorted(accepted))}")


def _selfplay_options() -> set[str]:
    """Keyword options of ``meeple_native.SelfPlay`` that a config may set (from its signature line)."""
    from meeple_native import SelfPlay

    first = (SelfPlay.__init__.__doc__ or "").split("\n", 1)[0]  # nanobind: "__init__(self, evaluator, *, a: int = 1, ...)"
    names = {part.split(":")[0].strip() for part in first[first.index("*,") + 2 : first.rindex(")")].split(",")}
    return names - {"seed", "planes_buffers"}  # set by the data module


def _check_dqn(cfg: DictConfig, phase: DQNPhase) -> None:
    for name in ("total_env_steps", "batch_size", "buffer_size", "publish_interval", "sync_interval",
                 "write_interval", "report_interval"):
        _require(getattr(phase, name) >= 1, f"phase.{name}", getattr(phase, name), "an integer >= 1")
    _require(phase.learning_starts >= 0, "phase.learning_starts", phase.learning_starts, "an integer >= 0")
    _require(phase.batch_size <= phase.buffer_size, "phase.batch_size", phase.batch_size,
             f"1..phase.buffer_size ({phase.buffer_size})")
    _require(phase.updates_per_step > 0, "phase.updates_per_step", phase.updates_per_step, "a float > 0")
    _require(phase.lr > 0, "phase.lr", phase.lr, "a float > 0")
    _require(0 < phase.gamma <= 1, "phase.gamma", phase.gamma, "a float in (0, 1]")
    _require(phase.loss_function in ("l2", "smooth_l1"), "phase.loss_function", phase.loss_function, "l2, smooth_l1")
    _require(phase.max_grad_norm is None or phase.max_grad_norm > 0, "phase.max_grad_norm",
             phase.max_grad_norm, "null or a float > 0")
    _require(len(phase.hidden) >= 1 and all(h >= 1 for h in phase.hidden), "phase.hidden", phase.hidden,
             "a non-empty list of layer widths >= 1")
    _require(phase.learner_device in ("auto", "cpu", "cuda", "mps") or phase.learner_device.startswith("cuda:"),
             "phase.learner_device", phase.learner_device, "auto (CUDA, then MPS, then CPU), cpu, cuda, cuda:N, mps")
    _require(phase.stop_timeout_s > 0, "phase.stop_timeout_s", phase.stop_timeout_s, "a float > 0 (seconds)")
    tu, ex = phase.target_update, phase.exploration
    _require(tu.kind in ("soft", "hard"), "phase.target_update.kind", tu.kind, "soft, hard")
    _require(0 < tu.tau <= 1, "phase.target_update.tau", tu.tau, "a float in (0, 1]")
    _require(tu.hard_interval >= 1, "phase.target_update.hard_interval", tu.hard_interval, "an integer >= 1")
    for name in ("eps_init", "eps_end"):
        _require(0 <= getattr(ex, name) <= 1, f"phase.exploration.{name}", getattr(ex, name), "a float in [0, 1]")
    _require(ex.annealing_steps >= 1, "phase.exploration.annealing_steps", ex.annealing_steps, "an integer >= 1")
    _require(phase.eval.episodes >= 1, "phase.eval.episodes", phase.eval.episodes, "an integer >= 1")


def check_accelerator(hw: Hardware) -> None:
    """A GPU profile on a machine without CUDA fails here, before any work."""
    import torch

    if hw.accelerator == "cuda" and not torch.cuda.is_available():
        raise ConfigError(
            f"hardware={hw.name} needs a CUDA GPU, but torch.cuda.is_available() is False on this machine; "
            "run with hardware=cpu"
        )
    if hw.accelerator == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"hardware={hw.name} needs Apple MPS, which is not available here; run with hardware=cpu")
