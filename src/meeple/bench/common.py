"""What the PPO benchmark's three implementations share: hyperparameters and timing.

Every implementation reads the same :class:`PPOHparams` (taken from meeple's
composed config) and reports through the same :class:`RunClock`, so "time to
solve", "collection" and "update" mean the same thing for all of them:

- the clock starts just before the first rollout (imports, model and env
  construction excluded);
- ``collect_s``: env stepping + policy inference (filling one rollout);
- ``eval_s``: greedy evaluation;
- ``update_s``: everything else inside the loop (advantages, SGD epochs,
  learning-rate schedule, framework bookkeeping and logging);
- ``cpu_time_to_solve_s``: this process's CPU time over the same span (less
  sensitive than wall time to other load on a shared machine);
- the run counts as solved at the end of the first evaluation whose mean
  greedy return reaches ``stop_return``; timings are frozen there.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from omegaconf import DictConfig

from meeple.errors import ConfigError


@dataclass(frozen=True)
class PPOHparams:
    env_id: str
    num_envs: int
    rollout_steps: int
    total_frames: int
    ppo_epochs: int
    minibatch_size: int
    lr: float
    adam_eps: float
    anneal_lr: bool
    max_grad_norm: float
    gamma: float
    gae_lambda: float
    clip_epsilon: float
    entropy_coef: float
    critic_coef: float
    normalize_advantage: bool
    hidden: tuple[int, ...]
    activation: str
    eval_every_n_rollouts: int
    eval_episodes: int
    eval_max_steps: int
    stop_return: float | None

    @property
    def frames_per_batch(self) -> int:
        return self.num_envs * self.rollout_steps

    @property
    def num_rollouts(self) -> int:
        """Rollouts in a full run (as meeple derives ``max_epochs``)."""
        return max(self.total_frames // self.frames_per_batch, 1)

    @property
    def minibatches_per_epoch(self) -> int:
        return self.frames_per_batch // self.minibatch_size

    def lr_at(self, rollout: int) -> float:
        """Learning rate for the update after rollout ``rollout`` (0-based): linear decay to 0."""
        if not self.anneal_lr:
            return self.lr
        return self.lr * max(1.0 - rollout / self.num_rollouts, 0.0)

    def is_eval_rollout(self, rollout: int) -> bool:
        """Evaluate after rollout ``rollout`` (1-based): every n rollouts and after the last one."""
        return rollout % self.eval_every_n_rollouts == 0 or rollout >= self.num_rollouts

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["hidden"] = list(self.hidden)
        return d

    @classmethod
    def from_config(cls, cfg: DictConfig) -> PPOHparams:
        """The hyperparameters meeple's run ``cfg`` trains with (gym backend, PPO phase, MLP model)."""
        env, phase, model = cfg.env, cfg.phase, cfg.model
        if env.backend != "gym":
            raise ConfigError(f"the PPO benchmark needs env.backend=gym, got {env.backend!r}")
        if int(env.num_workers) != 1:
            raise ConfigError(f"the PPO benchmark runs one env worker, got env.num_workers={env.num_workers}")
        if phase.name != "ppo":
            raise ConfigError(f"the PPO benchmark needs phase=ppo, got {phase.name!r}")
        if model.get("shared", False):
            raise ConfigError("the PPO benchmark baselines use separate actor and critic MLPs (model.shared=false)")
        if not str(phase.optimizer._target_).endswith("Adam"):
            raise ConfigError(f"the PPO benchmark baselines use Adam, got {phase.optimizer._target_}")
        loss = phase.loss
        return cls(
            env_id=str(env.id),
            num_envs=int(env.num_envs),
            rollout_steps=int(phase.rollout_steps),
            total_frames=int(phase.total_frames),
            ppo_epochs=int(phase.ppo_epochs),
            minibatch_size=int(phase.minibatch_size),
            lr=float(phase.lr),
            adam_eps=float(phase.optimizer.get("eps", 1e-8)),
            anneal_lr=bool(phase.anneal_lr),
            max_grad_norm=float(phase.max_grad_norm),
            gamma=float(loss.gamma),
            gae_lambda=float(loss.gae_lambda),
            clip_epsilon=float(loss.clip_epsilon),
            entropy_coef=float(loss.entropy_coef),
            critic_coef=float(loss.critic_coef),
            normalize_advantage=bool(loss.normalize_advantage),
            hidden=tuple(int(h) for h in model.hidden),
            activation=str(model.activation),
            eval_every_n_rollouts=int(phase.eval.every_n_rollouts),
            eval_episodes=int(phase.eval.episodes),
            eval_max_steps=int(phase.eval.max_steps),
            stop_return=None if phase.stop.eval_return is None else float(phase.stop.eval_return),
        )


class RunClock:
    """Accumulates one run's phase timings and its evaluation history."""

    def __init__(self, stop_return: float | None) -> None:
        self.stop_return = stop_return
        self.t0: float | None = None
        self.cpu0: float | None = None
        self.collect_s = 0.0
        self.eval_s = 0.0
        self.frames = 0
        self.rollouts = 0
        self.evals: list[dict[str, float]] = []
        self.solved_at: dict[str, float] | None = None
        self.end_s: float | None = None

    def start(self) -> None:
        self.t0 = time.perf_counter()
        self.cpu0 = time.process_time()

    def elapsed(self) -> float:
        assert self.t0 is not None, "RunClock.start() was not called"
        return time.perf_counter() - self.t0

    def add_collect(self, seconds: float, frames: int) -> None:
        self.collect_s += seconds
        self.frames += frames
        self.rollouts += 1

    def add_eval(self, seconds: float, mean_return: float) -> bool:
        """Record one evaluation that just ended; True when it solves the task (first time only)."""
        self.eval_s += seconds
        now = self.elapsed()
        self.evals.append({"frames": self.frames, "rollouts": self.rollouts, "mean_return": mean_return, "t_s": now})
        if self.solved_at is None and self.stop_return is not None and mean_return >= self.stop_return:
            self.solved_at = self._snapshot(now)
            return True
        return False

    def finish(self) -> None:
        self.end_s = self.elapsed()

    def _snapshot(self, now: float) -> dict[str, float]:
        return {
            "time_s": now,
            "cpu_s": time.process_time() - self.cpu0,
            "frames": self.frames,
            "rollouts": self.rollouts,
            "collect_s": self.collect_s,
            "eval_s": self.eval_s,
            "update_s": max(now - self.collect_s - self.eval_s, 0.0),
        }

    def result(self) -> dict[str, Any]:
        """Timings at the solving evaluation (or at the end of the run when never solved)."""
        if self.end_s is None:
            self.finish()
        point = self.solved_at or self._snapshot(self.end_s)
        frames = max(point["frames"], 1)
        return {
            "solved": self.solved_at is not None,
            "time_to_solve_s": point["time_s"],
            "cpu_time_to_solve_s": point["cpu_s"],
            "frames_to_solve": point["frames"],
            "rollouts_to_solve": point["rollouts"],
            "collect_s": point["collect_s"],
            "update_s": point["update_s"],
            "eval_s": point["eval_s"],
            "collect_fps": frames / max(point["collect_s"], 1e-9),
            "update_fps": frames / max(point["update_s"], 1e-9),
            "overall_fps": frames / max(point["time_s"], 1e-9),
            "sec_per_frame": point["time_s"] / frames,
            "final_eval_return": self.evals[-1]["mean_return"] if self.evals else None,
            "loop_s": self.end_s,
            "evals": self.evals,
        }


RESULT_FIELDS = (
    "solved",
    "time_to_solve_s",
    "cpu_time_to_solve_s",
    "frames_to_solve",
    "rollouts_to_solve",
    "collect_s",
    "update_s",
    "eval_s",
    "collect_fps",
    "update_fps",
    "overall_fps",
    "sec_per_frame",
    "final_eval_return",
    "loop_s",
    "evals",
)


def eval_seeds(seed: int) -> Iterator[int]:
    """Fresh seeds for each evaluation of a baseline, unrelated to its training envs' seed."""
    seq = np.random.SeedSequence(seed, spawn_key=(1,))
    while True:
        yield int(seq.spawn(1)[0].generate_state(1)[0])
