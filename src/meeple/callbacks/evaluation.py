"""Greedy evaluation at rollout boundaries, and the run's stop rule."""

from __future__ import annotations

import lightning as L
import torch
from torchrl.envs import EnvBase, ExplorationType, set_exploration_type

from meeple.callbacks.ranks import log_shared, on_rank_zero
from meeple.env_factory import round_to_unit
from meeple.seeding import Component
from meeple.tracking.keys import EVAL_RETURN


@torch.no_grad()
def greedy_episode_returns(env: EnvBase, policy: torch.nn.Module, max_steps: int) -> torch.Tensor:
    """Return of the first episode of each env in the batch, acting greedily.

    Envs that finish early keep stepping (auto-reset) but only their first
    episode counts. Episodes still running after ``max_steps`` count as they stand.
    """
    n = env.batch_size.numel()
    returns = torch.zeros(n)
    finished = torch.zeros(n, dtype=torch.bool)
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        td = env.reset()
        for _ in range(max_steps):
            td = policy(td.to(_device_of(policy)))
            td, td_next = env.step_and_maybe_reset(td.to(env.device or "cpu"))
            reward = td["next", "reward"].reshape(n).float().cpu()
            done = td["next", "done"].reshape(n).cpu()
            returns += torch.where(finished, 0.0, reward)
            finished |= done
            if finished.all():
                break
            td = td_next
    return returns


def evaluation_due(trainer: L.Trainer, every_n_rollouts: int) -> bool:
    """Whether the rollout that just ended is evaluated: every n-th, and always the last."""
    rollout = trainer.current_epoch + 1
    last = trainer.max_epochs is not None and rollout >= trainer.max_epochs
    return rollout % every_n_rollouts == 0 or last


def _device_of(module: torch.nn.Module) -> torch.device:
    param = next(module.parameters(), None)
    return param.device if param is not None else torch.device("cpu")


class ReturnEvaluation(L.Callback):
    """An evaluation whose latest mean return over ``episodes`` episodes (``last_return``; None
    before its first) the stage reports as its final ``eval/episode_return``."""

    episodes: int
    last_return: float | None = None


class GreedyEvaluation(ReturnEvaluation):
    """Every ``every_n_rollouts`` (and after the last rollout) plays ``episodes``
    greedy episodes in parallel on fresh seeds; logs ``eval/episode_return`` and
    stops the run once it reaches ``stop_at_return`` (null: never)."""

    def __init__(
        self, every_n_rollouts: int, episodes: int, max_steps: int, stop_at_return: float | None
    ) -> None:
        self.every_n_rollouts = every_n_rollouts
        self.episodes = episodes
        self.max_steps = max_steps
        self.stop_at_return = stop_at_return
        self.last_return: float | None = None
        self.history: list[tuple[int, float]] = []  # (frames, mean return)
        self._env: EnvBase | None = None
        self._seeds = None

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not evaluation_due(trainer, self.every_n_rollouts):
            return
        mean_return = on_rank_zero(trainer, lambda: self.evaluate(trainer, pl_module))
        log_shared(pl_module, {EVAL_RETURN: mean_return}, prog_bar=True)
        if self.stop_at_return is not None and mean_return >= self.stop_at_return:
            trainer.should_stop = True

    def evaluate(self, trainer: L.Trainer, pl_module: L.LightningModule) -> float:
        dm = trainer.datamodule
        if self._env is None:
            # Evaluation draws from its own seed stream: never the training envs' seeds.
            self._seeds = dm.seed_stream(Component.EVALUATION)
            # Backends built from groups of envs take a multiple of their unit (extra envs play too).
            episodes = round_to_unit(self.episodes, getattr(dm, "batch_unit", 1))
            # evaluation=True: never the envs a running env server hosts for the collector
            self._env = dm.env_fn(num_envs=episodes, seed=next(self._seeds), evaluation=True)
        else:
            self._env.set_seed(next(self._seeds))
        was_training = pl_module.training
        pl_module.eval()
        returns = greedy_episode_returns(self._env, pl_module.policy, self.max_steps)
        pl_module.train(was_training)
        self.last_return = returns.mean().item()
        self.history.append((getattr(dm, "frames", 0), self.last_return))
        return self.last_return

    # -- checkpoint state (its seed stream's position is saved with the datamodule's streams) --
    def state_dict(self) -> dict:
        return {"last_return": self.last_return, "history": list(self.history)}

    def load_state_dict(self, state: dict) -> None:
        self.last_return = state["last_return"]
        self.history = [tuple(point) for point in state["history"]]

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None
