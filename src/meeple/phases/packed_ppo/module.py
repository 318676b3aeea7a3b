"""PPO on packed-frame rollouts, with a decoupled objective that stays correct under policy lag.

Three policies meet in an asynchronous learner (Hilton et al., 2021, "Batch size-invariance
for policy optimization"): the behaviour policy mu that acted (its log-probs are in the
rollout), the proximal policy pi_prox (the learner's weights when this rollout's update
starts) and the policy being trained pi. The clipped surrogate trusts pi relative to pi_prox
and corrects for mu with a truncated importance weight:

    L_clip = -E[ w * min(r * A, clip(r, 1-eps, 1+eps) * A) ],  r = pi / pi_prox,
                                                               w = min(pi_prox / mu, w_max)

With no lag pi_prox = mu, w = 1, and this is the ordinary PPO clipped objective; the
rollout's own log-probs and values are then used as they are.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch

from meeple.phases.base import RolloutModule
from meeple.phases.packed_ppo.buffer import PackedRolloutBuffer
from meeple.tracking.keys import LOSS_TOTAL

log = logging.getLogger(__name__)


def decoupled_clip_loss(
    logp: torch.Tensor,
    prox_logp: torch.Tensor,
    behaviour_logp: torch.Tensor,
    advantage: torch.Tensor,
    clip_epsilon: float,
    max_weight: float,
) -> tuple[torch.Tensor, ...]:
    """The decoupled clipped surrogate (to minimise), its clip fraction and mean weight."""
    ratio = torch.exp(logp - prox_logp)
    weight = torch.exp(prox_logp - behaviour_logp).clamp(max=max_weight)
    unclipped = ratio * advantage
    clipped = ratio.clamp(1.0 - clip_epsilon, 1.0 + clip_epsilon) * advantage
    loss = -(weight * torch.minimum(unclipped, clipped)).mean()
    clip_fraction = ((ratio - 1.0).abs() > clip_epsilon).float().mean()
    return loss, clip_fraction, weight.mean()


def value_loss(value: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """0.5 * E[(V(s) - R)^2]."""
    return 0.5 * (value - target).pow(2).mean()


def normalize(advantage: torch.Tensor) -> torch.Tensor:
    return (advantage - advantage.mean()) / (advantage.std() + 1e-8)


class PackedPPOModule(RolloutModule):
    def __init__(
        self,
        net: torch.nn.Module,
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
        max_importance_weight: float,
    ) -> None:
        super().__init__(max_grad_norm=max_grad_norm)
        self.net = net
        self.optimizer_factory = optimizer
        self.anneal_lr = anneal_lr
        self.gamma, self.gae_lambda = gamma, gae_lambda
        self.clip_epsilon, self.entropy_coef, self.critic_coef = (
            clip_epsilon,
            entropy_coef,
            critic_coef,
        )
        self.normalize_advantage = normalize_advantage
        self.max_importance_weight = max_importance_weight

    @property
    def policy(self) -> torch.nn.Module:
        """``obs -> (logits, value)``; what a synchronous actor acts with."""
        return self.net

    @torch.no_grad()
    def prepare_rollout(self, buffer: PackedRolloutBuffer, lag: int, chunk: int) -> None:
        """Proximal log-probs and advantages for a rollout collected ``lag`` updates ago.

        Lagged rollouts get pi_prox and fresh values from the learner's current weights
        (in ``chunk``-sample pieces); with no lag both are the rollout's own.
        """
        if lag == 0:
            buffer.prox_logprobs.copy_(buffer.logprobs)
        else:
            obs = buffer.obs[: buffer.steps].reshape(buffer.samples, *buffer.obs.shape[2:])
            prox, values, actions = (
                x.view(-1) for x in (buffer.prox_logprobs, buffer.values, buffer.actions)
            )
            for start in range(0, buffer.samples, chunk):
                part = slice(start, start + chunk)
                logits, value = self.net(obs[part])
                prox[part] = (
                    torch.log_softmax(logits, -1)
                    .gather(-1, actions[part].unsqueeze(-1))
                    .squeeze(-1)
                )
                values[part] = value
            buffer.bootstrap_value.copy_(self.net(buffer.obs[buffer.steps])[1])
        buffer.compute_gae(self.gamma, self.gae_lambda)

    def training_step(self, batch: dict, batch_idx: int) -> None:
        logits, value = self.net(batch["obs"])
        log_probs = torch.log_softmax(logits, dim=-1)
        logp = log_probs.gather(-1, batch["actions"].unsqueeze(-1)).squeeze(-1)
        advantage = batch["advantages"]
        if self.normalize_advantage:  # per minibatch
            advantage = normalize(advantage)
        policy_loss, clip_fraction, weight = decoupled_clip_loss(
            logp,
            batch["prox_logprobs"],
            batch["logprobs"],
            advantage,
            self.clip_epsilon,
            self.max_importance_weight,
        )
        critic = value_loss(value, batch["returns"])
        entropy = -(log_probs.exp() * log_probs).sum(-1).mean()
        loss = policy_loss + self.critic_coef * critic - self.entropy_coef * entropy
        self.optimize(loss)
        self.accumulate(
            {
                LOSS_TOTAL: loss,
                "loss/objective": policy_loss,
                "loss/critic": critic,
                "loss/entropy": -entropy,
                "train/clip_fraction": clip_fraction,
                "train/importance_weight": weight,
                "train/entropy": entropy,
                "train/kl_approx": (batch["prox_logprobs"] - logp).mean(),
            }
        )
        self.live["loss"] = loss.detach()

    def configure_optimizers(self):
        optimizer = self.optimizer_factory(self.net.parameters())
        return self.with_lr_schedule(optimizer, "linear" if self.anneal_lr else "constant")

    def on_train_start(self) -> None:
        report = getattr(self.trainer.datamodule, "memory_report", None)
        if report is None:
            return
        log.info(
            "rollout observation memory: packed %s bytes, unpacked uint8 %s (x%.0f), float32 %s (x%.0f)",
            f"{report['packed']:,}",
            f"{report['unpacked_uint8']:,}",
            report["unpacked_uint8"] / report["packed"],
            f"{report['unpacked_float32']:,}",
            report["unpacked_float32"] / report["packed"],
        )
        for logger in self.loggers:
            logger.log_metrics(
                {f"memory/rollout_obs_bytes_{k}": float(v) for k, v in report.items()}, step=0
            )
