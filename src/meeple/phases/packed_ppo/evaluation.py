"""Greedy evaluation of a packed-frame policy: success rate and return of fresh episodes."""

from __future__ import annotations

import logging

import lightning as L
import torch

from meeple.callbacks.evaluation import ReturnEvaluation, evaluation_due
from meeple.envs.packed_env import PackedEnv
from meeple.phases.packed_ppo.buffer import PackedRolloutBuffer
from meeple.seeding import Component
from meeple.tracking.keys import EVAL_RETURN

EVAL_SUCCESS = "eval/success_rate"
log = logging.getLogger(__name__)


@torch.no_grad()
def greedy_first_episodes(
    env: PackedEnv, policy: torch.nn.Module, max_steps: int
) -> tuple[torch.Tensor, ...]:
    """Return and success (when the env reports ``last_success``) of each env's first episode,
    acting greedily for ``max_steps`` steps; episodes still running count as they stand."""
    n = env.num_envs
    buffer = PackedRolloutBuffer(
        1, n, env.frames_per_obs, env.device
    )  # one slot, rendered in place
    returns = torch.zeros(n, device=env.device)
    success = torch.zeros(n, dtype=torch.bool, device=env.device)
    finished = torch.zeros(n, dtype=torch.bool, device=env.device)
    env.render_packed_into(buffer.obs, 0)
    for _ in range(max_steps):
        logits, _ = policy(buffer.obs[0])
        torch.argmax(logits, dim=-1, out=buffer.actions[0])
        env.step(buffer.actions, buffer.rewards, buffer.dones, 0)
        env.render_packed_into(buffer.obs, 0)
        returns += torch.where(finished, 0.0, buffer.rewards[0])
        if hasattr(env, "last_success"):
            success |= ~finished & env.last_success
        finished |= buffer.dones[0]
    return returns, success


class PackedGreedyEvaluation(ReturnEvaluation):
    """Every ``every_n_rollouts`` (and after the last) plays ``episodes`` greedy episodes on
    fresh seeds; logs ``eval/success_rate`` and ``eval/episode_return``; stops the run once
    the success rate reaches ``stop_at_success`` (null: never)."""

    def __init__(
        self, every_n_rollouts: int, episodes: int, max_steps: int, stop_at_success: float | None
    ) -> None:
        self.every_n_rollouts = every_n_rollouts
        self.episodes = episodes
        self.max_steps = max_steps
        self.stop_at_success = stop_at_success
        self.last_return: float | None = None
        self.last_success: float | None = None
        self.history: list[tuple[int, float]] = []  # (frames, success rate)
        self._seeds = None

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not evaluation_due(trainer, self.every_n_rollouts):
            return
        success, mean_return = self.evaluate(trainer, pl_module)
        pl_module.log(EVAL_SUCCESS, success, prog_bar=True, on_step=False, on_epoch=True)
        pl_module.log(EVAL_RETURN, mean_return, on_step=False, on_epoch=True)
        if self.stop_at_success is not None and success >= self.stop_at_success:
            trainer.should_stop = True

    def evaluate(self, trainer: L.Trainer, pl_module: L.LightningModule) -> tuple[float, float]:
        dm = trainer.datamodule
        if self._seeds is None:  # its own seed stream: never the training envs' seeds
            self._seeds = dm.seeds.stream(Component.EVALUATION)
        env = dm.env_factory(num_envs=self.episodes, device=pl_module.device)
        env.reset(next(self._seeds))
        was_training = pl_module.training
        pl_module.eval()
        returns, success = greedy_first_episodes(env, pl_module.policy, self.max_steps)
        pl_module.train(was_training)
        self.last_success, self.last_return = torch.stack(
            [success.double().mean(), returns.double().mean()]
        ).tolist()
        self.history.append((dm.frames, self.last_success))
        log.info(
            "greedy evaluation at %s frames: success rate %.2f, mean return %.2f (%d episodes)",
            f"{dm.frames:,}",
            self.last_success,
            self.last_return,
            self.episodes,
        )
        return self.last_success, self.last_return

    def state_dict(self) -> dict:
        return {
            "last_return": self.last_return,
            "last_success": self.last_success,
            "history": list(self.history),
        }

    def load_state_dict(self, state: dict) -> None:
        self.last_return, self.last_success = state["last_return"], state["last_success"]
        self.history = [tuple(point) for point in state["history"]]
