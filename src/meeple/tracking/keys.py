"""Metric keys that dashboards, sweeps and tests rely on (keep them stable)."""

EVAL_RETURN = "eval/episode_return"
TRAIN_RETURN = "train/episode_return"
FRAMES_PER_S = "perf/frames_per_s"
LOSS_TOTAL = "loss/total"

# AlphaZero (self-play engine, gate, a game's benchmark callback).
SELFPLAY_SIMS_PER_S = "selfplay/simulations_per_s"
SELFPLAY_POSITIONS_PER_S = "selfplay/positions_per_s"
SELFPLAY_GAMES_PER_H = "selfplay/games_per_h"
SELFPLAY_FILL_RATIO = "selfplay/fill_ratio"
SELFPLAY_EVALUATOR_IDLE = "selfplay/evaluator_idle_fraction"
GATE_SCORE = "gate/score"
GATE_ACCEPTED = "gate/accepted"
GATE_GENERATION = "gate/generation"
EVAL_VS_MCTS = "eval/win_rate_vs_mcts"
EVAL_VS_SOLVER = "eval/win_rate_vs_solver"
EVAL_SOLVER_KEPT = "eval/solver_value_kept"


def optimal_share_key(bench: str, chooser: str, kind: str = "optimal") -> str:
    """e.g. ``eval/generated_middle/optimal_mcts``: share of ``kind`` moves chosen by ``chooser``."""
    return f"eval/{bench}/{kind}_{chooser}"


# Independent multi-agent runs (meeple.phases.dqn): one curve per agent, ``{agent}`` filled in by
# agent_key. The un-namespaced keys above hold the mean over agents.
AGENT_TRAIN_RETURN = "train/{agent}/episode_return"
AGENT_EVAL_RETURN = "eval/{agent}/episode_return"
AGENT_RANDOM_RETURN = "eval/{agent}/random_return"
AGENT_LOSS = "loss/{agent}/td"
AGENT_UPDATES_PER_S = "perf/{agent}/updates_per_s"
AGENT_POLICY_LAG = (
    "perf/{agent}/policy_lag"  # learner version minus the actor's local copy's version
)
RANDOM_RETURN = "eval/random_return"
EPSILON = "train/epsilon"
ENV_STEPS_PER_S = "perf/env_steps_per_s"
ACTOR_WAIT_S = "perf/actor_wait_s"  # seconds the actor has waited for learners (phase.max_update_lag)


def agent_key(template: str, agent: str) -> str:
    """The metric key of ``agent`` for one of the ``AGENT_*`` templates."""
    return template.format(agent=agent)
