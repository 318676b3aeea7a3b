"""``python train.py +experiment=independent_dqn``: build, run and evaluate independent DQN agents.

:func:`build_independent` makes everything a run needs without starting a process (config tests
use it); :func:`train_independent` runs the topology with a live progress display, logs one
curve per agent to MLflow, evaluates every agent greedily (and a random policy on the same env
seeds) at the end, and returns the final metrics.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from meeple.callbacks.progress import LINE_WIDTH
from meeple.envs.pettingzoo import AgentSpec, agent_specs, make_pettingzoo_env
from meeple.errors import ConfigError
from meeple.logs import is_terminal
from meeple.phases.dqn.dqn import DQNSpec, make_dqn_model
from meeple.phases.dqn.evaluation import evaluate
from meeple.phases.dqn.schema import DQNPhase, check_dqn_stage
from meeple.phases.dqn.shared import SharedModel, make_shared_buffer, transition_template
from meeple.phases.dqn.state import Report, SharedRunState, update_budget
from meeple.phases.dqn.topology import IndependentTopology
from meeple.seeding import Component, PhaseSeeds, resolve_master_seed, seed_process
from meeple.tracking import keys

log = logging.getLogger("meeple")
RETURN_WINDOW = 20  # episodes in the running mean shown and logged as train/episode_return
PLAIN_EVERY_S = 10.0  # a plain progress line (log file or pipe) at most this often, and the last


@dataclass
class IndependentRun:
    """A built, not yet started, independent-learners run."""

    phase: DQNPhase
    env_cfg: dict[str, Any]
    agents: list[AgentSpec]
    seeds: PhaseSeeds
    state: SharedRunState
    topology: IndependentTopology

    @property
    def agent_names(self) -> list[str]:
        return [a.name for a in self.agents]


def dqn_kwargs(phase: DQNPhase) -> dict[str, Any]:
    """The :class:`DQNSpec` fields the config sets (everything but the agent's dimensions)."""
    return dict(
        hidden=tuple(phase.hidden),
        gamma=phase.gamma,
        double_dqn=phase.double_dqn,
        loss_function=phase.loss_function,
    )


def build_independent(
    cfg: DictConfig,
    *,
    typed: dict[str, Any] | None = None,
    actor_target: str | None = None,
    learner_target: str | None = None,
    phase_index: int = 0,
) -> IndependentRun:
    """Probe the env for the agents, and create the shared state and topology. ``typed``: the
    stage's validated hardware and phase (a run's plan has them); without it (benchmarks,
    tests) ``cfg`` is checked here."""
    typed = typed or check_dqn_stage(cfg)
    phase: DQNPhase = typed["phase"]
    torch.set_num_threads(typed["hardware"].torch_threads)
    seeds = PhaseSeeds(resolve_master_seed(cfg.seed), phase_index)
    env_cfg = OmegaConf.to_container(cfg.env, resolve=True)
    probe = make_pettingzoo_env(env_cfg, seed=seeds.seed(Component.ENV))
    agents = agent_specs(probe)
    probe.close()
    if len(agents) < 2:
        raise ConfigError(
            f"env {env_cfg.get('id')!r} has {len(agents)} agent; independent learners need 2 or more"
        )

    dqn = dqn_kwargs(phase)
    models, buffers = [], []
    for agent, init_seed in zip(agents, seeds.worker_seeds(Component.MODEL_INIT, len(agents))):
        seed_process(init_seed)  # each agent's own initial weights
        spec = DQNSpec(agent.obs_dim, agent.num_actions, **dqn)
        models.append(SharedModel(lambda spec=spec: make_dqn_model(spec)))
        buffers.append(
            make_shared_buffer(
                transition_template(agent.obs_dim), phase.buffer_size, phase.batch_size
            )
        )
    state = SharedRunState(models=models, buffers=buffers)

    data_seeds = seeds.worker_seeds(Component.DATA, len(agents) + 1)
    ex = phase.exploration
    actor_kwargs = dict(
        env_cfg=env_cfg,
        agents=agents,
        dqn=dqn,
        exploration=dict(
            eps_init=ex.eps_init, eps_end=ex.eps_end, annealing_steps=ex.annealing_steps
        ),
        seed=data_seeds[0],
        total_steps=phase.total_env_steps,
        sync_interval=phase.sync_interval,
        write_interval=phase.write_interval,
        report_interval=phase.report_interval,
        learning_starts=phase.learning_starts,
        updates_per_step=phase.updates_per_step,
        max_update_lag=phase.max_update_lag,
    )
    optimizer = OmegaConf.to_container(cfg.phase.optimizer, resolve=True)
    tu = phase.target_update
    learner_kwargs = [
        dict(
            index=i,
            agent=agent,
            dqn=dqn,
            optimizer=optimizer,
            update=dict(
                target_update=tu.kind,
                tau=tu.tau,
                hard_interval=tu.hard_interval,
                max_grad_norm=phase.max_grad_norm,
            ),
            device=phase.learner_device,
            seed=data_seeds[i + 1],
            batch_size=phase.batch_size,
            learning_starts=phase.learning_starts,
            updates_per_step=phase.updates_per_step,
            publish_interval=phase.publish_interval,
            report_interval=phase.report_interval,
        )
        for i, agent in enumerate(agents)
    ]
    targets = {
        k: v for k, v in (("actor_target", actor_target), ("learner_target", learner_target)) if v
    }
    final_updates = update_budget(
        phase.total_env_steps, phase.learning_starts, phase.updates_per_step
    )
    topology = IndependentTopology(
        state,
        actor_kwargs,
        learner_kwargs,
        [a.name for a in agents],
        stop_timeout_s=phase.stop_timeout_s,
        final_updates=final_updates,
        **targets,
    )
    return IndependentRun(
        phase=phase, env_cfg=env_cfg, agents=agents, seeds=seeds, state=state, topology=topology
    )


class RunMonitor:
    """Turns worker reports into MLflow metrics (one curve per agent) and a live progress line."""

    def __init__(
        self,
        agents: Sequence[str],
        total_steps: int,
        logger=None,
        progress: Progress | None = None,
        plain_every_s: float | None = None,
    ):
        """``progress``: a rich bar (a terminal); ``plain_every_s``: instead, a plain line of at
        most 80 characters at most this often (a log file or pipe, where a bar cannot redraw)."""
        self.agents = list(agents)
        self.logger, self.progress = logger, progress
        self.total_steps, self.plain_every_s = total_steps, plain_every_s
        self._last_line = float("-inf")
        self.task = progress.add_task("independent DQN", total=total_steps) if progress else None
        self.returns: dict[str, deque[float]] = {a: deque(maxlen=RETURN_WINDOW) for a in agents}
        self.history: dict[str, list[tuple[int, float]]] = defaultdict(
            list
        )  # agent -> (env step, return)
        self.env_steps = 0
        self.updates: dict[str, int] = dict.fromkeys(agents, 0)
        self.versions: dict[str, int] = dict.fromkeys(agents, 0)
        self.metrics: dict[str, float] = {}
        self.t0 = time.perf_counter()

    def _log(self, metrics: dict[str, float], step: int) -> None:
        self.metrics.update(metrics)
        if self.logger is not None:
            self.logger.log_metrics(metrics, step=step)

    def __call__(self, kind: str, sender: str, payload: dict[str, Any]) -> None:
        if kind == Report.EPISODE:
            step = payload["env_steps"]
            metrics = {}
            for agent, ret in payload["returns"].items():
                self.returns[agent].append(ret)
                self.history[agent].append((step, ret))
                metrics[keys.agent_key(keys.AGENT_TRAIN_RETURN, agent)] = ret
            means = [sum(r) / len(r) for r in self.returns.values() if r]
            metrics[keys.TRAIN_RETURN] = sum(means) / len(means)
            self._log(metrics, step)
        elif kind == Report.ACTOR:
            self.env_steps = payload["env_steps"]
            rate = self.env_steps / max(time.perf_counter() - self.t0, 1e-9)
            metrics = {
                keys.EPSILON: payload["epsilon"],
                keys.ENV_STEPS_PER_S: rate,
                keys.ACTOR_WAIT_S: payload["waited_s"],
            }
            for agent, version in zip(self.agents, payload["versions"]):
                metrics[keys.agent_key(keys.AGENT_POLICY_LAG, agent)] = (
                    self.versions[agent] - version
                )
            self._log(metrics, self.env_steps)
        elif kind == Report.LEARNER:
            agent = payload["agent"]
            self.updates[agent], self.versions[agent] = payload["updates"], payload["version"]
            self._log(
                {
                    keys.agent_key(keys.AGENT_LOSS, agent): payload["loss"],
                    keys.agent_key(keys.AGENT_UPDATES_PER_S, agent): payload["updates_per_s"],
                },
                payload["env_steps"],
            )
        if self.progress is not None:
            self.progress.update(self.task, completed=self.env_steps, description=self.describe())
        elif self.plain_every_s is not None:
            now = time.perf_counter()
            if now - self._last_line >= self.plain_every_s or self.env_steps >= self.total_steps:
                self._last_line = now
                print(self.plain_line(now - self.t0), flush=True)

    def plain_line(self, elapsed_s: float) -> str:
        """``env steps 1200/30000 14s agent_0: return -21.3 upd 310 | ...``, cut at 80."""
        line = f"env steps {self.env_steps}/{self.total_steps} {elapsed_s:.0f}s {self.describe()}"
        return line[:LINE_WIDTH]

    def describe(self) -> str:
        parts = []
        for agent in self.agents:
            r = self.returns[agent]
            mean = f"{sum(r) / len(r):.1f}" if r else "-"
            parts.append(f"{agent}: return {mean} upd {self.updates[agent]}")
        return " | ".join(parts)


def make_progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("env steps"),
        TimeElapsedColumn(),
    )


def train_independent(
    cfg: DictConfig,
    *,
    typed: dict[str, Any] | None = None,
    logger=None,
    show_progress: bool = True,
    phase_index: int = 0,
) -> dict[str, float]:
    """Run the topology to ``phase.total_env_steps``, then evaluate; return the final metrics
    (``typed``: as for :func:`build_independent`)."""
    run = build_independent(cfg, typed=typed, phase_index=phase_index)
    log.info(
        "independent DQN: %d agents (%s), 1 actor + %d learner processes, master seed %d",
        len(run.agents),
        ", ".join(run.agent_names),
        len(run.agents),
        run.seeds.master,
    )
    # a rich bar on a terminal; in a log file or pipe it cannot redraw: plain lines instead
    progress = make_progress() if show_progress and is_terminal() else None
    monitor = RunMonitor(
        run.agent_names,
        run.phase.total_env_steps,
        logger=logger,
        progress=progress,
        plain_every_s=PLAIN_EVERY_S if show_progress and progress is None else None,
    )
    t0 = time.perf_counter()
    try:
        if progress is not None:
            with progress:
                run.topology.run(monitor)
        else:
            run.topology.run(monitor)
        elapsed = time.perf_counter() - t0
        metrics = dict(monitor.metrics)
        metrics[keys.ENV_STEPS_PER_S] = run.state.env_steps / max(elapsed, 1e-9)
        metrics.update(evaluate_run(run, logger=logger))
    finally:
        run.topology.close()
    return metrics


def evaluate_run(run: IndependentRun, *, logger=None) -> dict[str, float]:
    """Greedy return of each agent's final shared model vs a random policy, on the same env seeds."""
    seed = run.seeds.seed(Component.EVALUATION)
    episodes = run.phase.eval.episodes
    models = []
    for shared, agent in zip(run.state.models, run.agents):
        local = make_dqn_model(DQNSpec(agent.obs_dim, agent.num_actions, **dqn_kwargs(run.phase)))
        shared.read_into(local)
        models.append(local)
    greedy = evaluate(run.env_cfg, run.agents, models, episodes=episodes, seed=seed)
    random = evaluate(run.env_cfg, run.agents, None, episodes=episodes, seed=seed)
    metrics = {}
    for agent in run.agent_names:
        metrics[keys.agent_key(keys.AGENT_EVAL_RETURN, agent)] = greedy[agent]
        metrics[keys.agent_key(keys.AGENT_RANDOM_RETURN, agent)] = random[agent]
        log.info(
            "%s: greedy return %.2f vs random %.2f over %d episodes",
            agent,
            greedy[agent],
            random[agent],
            episodes,
        )
    metrics[keys.EVAL_RETURN] = sum(greedy.values()) / len(greedy)
    metrics[keys.RANDOM_RETURN] = sum(random.values()) / len(random)
    if logger is not None:
        logger.log_metrics(metrics, step=run.state.env_steps)
    return metrics


def run_dqn_stage(stage: Any, cfg: DictConfig, context: Any) -> tuple[dict[str, float], int]:
    """The pipeline's process runner for ``phase=dqn`` (no Lightning Trainer, no checkpoints
    yet, so the plan runs it alone and never resumes it): its own MLflow run, workers stopped
    on completion, Ctrl-C or a crash."""
    from meeple.tracking.mlflow import log_run_config, make_mlflow_logger

    master, tracking = context.master_seed, context.tracking
    logger = make_mlflow_logger(cfg, master_seed=master,
                                run_dir=context.session.run.path if context.session else None)
    if logger is not None:
        log_run_config(logger, cfg, master_seed=master, log_artifact=tracking.log_config_artifact)
        log.info("MLflow run %s in %s (experiment %r)", logger.run_id, tracking.uri, tracking.experiment)
    status = "FAILED"
    try:
        metrics = train_independent(cfg, typed=stage.typed, logger=logger, phase_index=stage.index)
        status = "FINISHED"
    except KeyboardInterrupt:  # Ctrl-C: every worker has been stopped by now
        status = "KILLED"
        raise KeyboardInterrupt("every worker process has ended (phase=dqn keeps no checkpoints)") from None
    finally:
        if logger is not None:
            logger.finalize(status)
    return metrics, int(stage.typed["phase"].total_env_steps)
