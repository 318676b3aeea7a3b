"""Placement against baseline players during training (the auto-battler's evaluation)."""

from __future__ import annotations

import lightning as L
import numpy as np
import torch
from tensordict import TensorDict
from torchrl.envs import ExplorationType, set_exploration_type

from meeple.callbacks.evaluation import evaluation_due
from meeple.errors import ConfigError
from meeple.seeding import Component
from meeple.viewer.artifacts import publish_replays
from meeple_autobattler.evaluate import EQUAL_PLACE, opponent_act, play
from meeple_autobattler.replay import GameRecorder

# eval/episode_return stays the run's metric name (sweeps, stop rules): here it is the
# placement score 4.5 - mean place, positive when the policy places above the baseline players.
METRIC = "eval/episode_return"
MAX_GAME_STEPS = 400


@torch.no_grad()
def _forward(policy: torch.nn.Module, obs: np.ndarray, mask: np.ndarray) -> TensorDict:
    td = TensorDict({"observation": torch.from_numpy(obs), "action_mask": torch.from_numpy(mask).bool()},
                    batch_size=[len(obs)])
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        return policy(td)


def torchrl_act(policy: torch.nn.Module):
    """Greedy actions of the training module's TorchRL policy on (obs, mask) arrays."""
    return lambda obs, mask: _forward(policy, obs, mask)["action"].numpy().astype(np.int32)


def torchrl_probs(policy: torch.nn.Module):
    """The policy's action probabilities (its logits, softmax over the legal actions) on (obs, mask)."""

    def probs(obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
        logits = _forward(policy, obs, mask)["logits"].float()
        return torch.softmax(logits.masked_fill(~torch.from_numpy(mask).bool(), float("-inf")), -1).numpy()

    return probs


class PlacementEvaluation(L.Callback):
    """Every ``every_n_rollouts`` (and after the last) plays ``episodes`` games with the policy in
    one seat and ``opponent`` players (random | scripted) in the other seven; logs
    ``eval/mean_place`` and ``eval/episode_return`` = 4.5 - mean place, and stops the run once that
    reaches ``stop_at_return`` (null: never). The first ``replays`` of those games (at most
    ``episodes``; 0: none) are saved as viewer pages, seen from the policy's seat."""

    def __init__(
        self, every_n_rollouts: int, episodes: int, max_steps: int, stop_at_return: float | None,
        opponent: str = "scripted", replays: int = 0,
    ) -> None:
        if replays < 0:
            raise ConfigError(f"PlacementEvaluation replays={replays}; accepted: an integer >= 0 (0: no replays)")
        self.every_n_rollouts, self.games, self.max_steps = every_n_rollouts, episodes, max_steps
        self.stop_at_return, self.opponent, self.replays = stop_at_return, opponent, replays
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
        watched = min(self.replays, self.games) if trainer.global_rank == 0 else 0
        recorders = [GameRecorder(torchrl_probs(pl_module.policy)) for _ in range(watched)]
        # a game takes at most 30 rounds x 10 actions: a smaller step cap would cut games short
        places = play(torchrl_act(pl_module.policy), opponent_act(self.opponent, seed),
                      games=self.games, seed=seed, max_steps=max(self.max_steps, MAX_GAME_STEPS),
                      watch=lambda game, obs, mask, action: recorders[game].record(obs, mask, action),
                      watched=watched)
        pl_module.train(was_training)
        epoch = trainer.current_epoch + 1
        publish_replays(trainer, [
            rec.replay(f"autobattler rollout {epoch} game {g + 1}: policy in seat {g % 8 + 1} vs 7 {self.opponent}",
                       int(places[g]), [f"policy (seat {g % 8 + 1})", *[self.opponent] * 7])
            for g, rec in enumerate(recorders)])
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
