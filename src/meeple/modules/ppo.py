"""PPO as a LightningModule: clipped surrogate + value loss + entropy bonus, GAE advantages.

The math lives in TorchRL's ``ClipPPOLoss`` and ``GAE``; this module owns the
optimisation schedule and what is logged. Data arrives from
:class:`meeple.data.rollout.RolloutDataModule`, which calls
:meth:`compute_advantages` once per rollout and then yields minibatches.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from tensordict import TensorDictBase
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE

from meeple.modules.base import RolloutModule
from meeple.tracking.keys import LOSS_TOTAL

# Per-minibatch diagnostics from ClipPPOLoss, logged under train/.
_DIAGNOSTICS = ("clip_fraction", "kl_approx", "entropy", "ESS", "explained_variance")


class PPOModule(RolloutModule):
    def __init__(
        self,
        actor: torch.nn.Module,
        critic: torch.nn.Module,
        *,
        optimizer: Callable[..., torch.optim.Optimizer],
        anneal_lr: bool,
        max_grad_norm: float | None,
        gamma: float,
        gae_lambda: float,
        clip_epsilon: float,
        entropy_coef: float,
        critic_coef: float,
        normalize_advantage: bool,
    ) -> None:
        super().__init__(max_grad_norm=max_grad_norm)
        self.actor = actor
        self.critic = critic
        self.optimizer_factory = optimizer
        self.anneal_lr = anneal_lr
        self.loss_module = ClipPPOLoss(
            actor,
            critic,
            clip_epsilon=clip_epsilon,
            entropy_bonus=entropy_coef > 0,
            entropy_coeff=entropy_coef,
            critic_coeff=critic_coef,
            loss_critic_type="l2",
            normalize_advantage=normalize_advantage,
        )
        self.advantage_module = GAE(gamma=gamma, lmbda=gae_lambda, value_network=critic, average_gae=False)

    @property
    def policy(self) -> torch.nn.Module:
        """What the collector acts with (stochastic; greedy under DETERMINISTIC exploration)."""
        return self.actor

    @torch.no_grad()
    def compute_advantages(self, rollout: TensorDictBase) -> TensorDictBase:
        """Writes ``advantage`` and ``value_target`` (A_t = sum_l (gamma*lambda)^l delta_{t+l})."""
        return self.advantage_module(rollout)

    def training_step(self, batch: TensorDictBase, batch_idx: int) -> None:
        losses = self.loss_module(batch)
        loss = losses["loss_objective"] + losses["loss_critic"]
        if "loss_entropy" in losses.keys():
            loss = loss + losses["loss_entropy"]
        metrics = {LOSS_TOTAL: loss}
        for key in ("loss_objective", "loss_critic", "loss_entropy"):
            if key in losses.keys():
                metrics[f"loss/{key.removeprefix('loss_')}"] = losses[key]
        for key in _DIAGNOSTICS:
            if key in losses.keys():
                metrics[f"train/{key}"] = losses[key].mean()
        self.optimize(loss)
        self.accumulate(metrics)  # logged as per-rollout means
        self.live["loss"] = loss.detach()

    def configure_optimizers(self):
        return self.with_linear_anneal(self.optimizer_factory(self.loss_module.parameters()), self.anneal_lr)
