"""Placement against baseline players during training (the auto-battler's evaluation)."""

from __future__ import annotations

import lightning as L
import numpy as np
import torch
from tensordict import TensorDict
from torchrl.envs import ExplorationType, set_exploration_type

from meeple.callbacks.evaluation import evaluation_due
from meeple.seeding import Component
from meeple_autobattler.evaluate import EQUAL_PLACE, opponent_act, play

# eval/episode_return stays the run's metric name (sweeps, stop rules): here it is the
# placement score 4.5 - mean place, positive when the policy places above the baseline players.
METRIC = "eval/episode_return"
MAX_GAME_STEPS = 400


def torchrl_act(policy: torch.nn.Module):
    """Greedy actions of the training module's TorchRL policy on (obs, mask) arrays."""

    @torch.no_grad()
    def act(obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
        td = TensorDict(
            {"observation": torch.from_numpy(obs), "action_mask": torch.from_numpy(mask).bool()},
            batch_size=[len(obs)],
        )
        with set_exploration_type(ExplorationType.DETERMINISTIC):
            return policy(td)["action"].numpy().astype(np.int32)

    return act


class PlacementEvaluation(L.Callback):
    """Every ``every_n_rollouts`` (and after the last) plays ``episodes`` games with the policy in
    one seat and ``opponent`` players (random | scripted) in the other seven; logs
    ``eval/mean_place`` and ``eval/episode_return`` = 4.5 - mean place, and stops the run once that
    reaches ``stop_at_return`` (null: never)."""

    def __init__(
        self, every_n_rollouts: int, episodes: int, max_steps: int, stop_at_return: float | None,
        opponent: str = "scripted",
    ) -> None:
        self.every_n_rollouts, self.games, self.max_steps = every_n_rollouts, episodes, max_steps
        self.stop_at_return, self.opponent = stop_at_return, opponent
        self.history: list[tuple[int, float]] = []
        self._seeds = None

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not evaluation_due(trainer, self.every_n_rollouts):
            return
        dm = trainer.datamodule
        if self._seeds is None:
            self._seeds = dm.seed_stream(Component.EVALUATION)
        seed = int(next(self._seeds)) % 2**31
        was_training = pl_module.training
        pl_module.eval()
        # a game takes at most 30 rounds x 10 actions: a smaller step cap would cut games short
        places = play(torchrl_act(pl_module.policy), opponent_act(self.opponent, seed),
                      games=self.games, seed=seed, max_steps=max(self.max_steps, MAX_GAME_STEPS))
        pl_module.train(was_training)
        mean = float(places.mean())
        score = EQUAL_PLACE - mean
        self.history.append((getattr(dm, "frames", 0), mean))
        pl_module.log("eval/mean_place", mean, on_step=False, on_epoch=True)
        pl_module.log(METRIC, score, prog_bar=True, on_step=False, on_epoch=True)
        if self.stop_at_return is not None and score >= self.stop_at_return:
            trainer.should_stop = True

    def state_dict(self) -> dict:
        return {"history": list(self.history)}

    def load_state_dict(self, state: dict) -> None:
        self.history = [tuple(point) for point in state["history"]]
