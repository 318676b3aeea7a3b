"""AlphaZero: a policy/value network trained on its own MCTS self-play.

``net`` is the candidate being trained; ``best`` is a frozen copy that plays self-play
and is replaced only when the candidate beats it (``meeple.phases.alphazero.callbacks.AlphaZeroGate``).
The loss is the AlphaZero one: cross-entropy between the search's visit distribution and
the network policy, squared error between the game result and the value, plus an L2
penalty on the weights.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
from tensordict import TensorDictBase
from torch import nn

from meeple.phases.base import RolloutModule
from meeple.tracking.keys import LOSS_TOTAL

ILLEGAL_LOGIT = -1.0e4  # masked logits: exp() underflows to 0, finite in 16-bit precision


def alphazero_loss(
    logits: torch.Tensor,
    value: torch.Tensor,
    batch: TensorDictBase,
    weights: list[torch.Tensor],
    weight_decay: float,
    value_coef: float,
) -> dict[str, torch.Tensor]:
    """Policy cross-entropy (over legal moves) + value MSE + ``weight_decay`` * sum of squared weights."""
    logits = logits.float().masked_fill(~batch["legal"], ILLEGAL_LOGIT)
    log_p = torch.log_softmax(logits, dim=-1)
    target = batch["policy"]
    policy = -(target * log_p).sum(-1).mean()
    # Entropy of the target: cross-entropy minus this is the KL divergence (0 = perfect fit).
    target_entropy = -(target * torch.log(target.clamp_min(1e-12))).sum(-1).mean()
    value_loss = torch.nn.functional.mse_loss(value.float(), batch["value"])
    l2 = weight_decay * sum(w.pow(2).sum() for w in weights)
    total = policy + value_coef * value_loss + l2
    return {
        LOSS_TOTAL: total,
        "loss/policy": policy,
        "loss/policy_kl": policy - target_entropy,
        "loss/value": value_loss,
        "loss/l2": l2,
    }


class AlphaZeroModule(RolloutModule):
    def __init__(
        self,
        net: nn.Module,
        optimizer: Callable[..., torch.optim.Optimizer],
        *,
        weight_decay: float = 1.0e-4,
        value_coef: float = 1.0,
        max_grad_norm: float | None = None,
    ) -> None:
        super().__init__(max_grad_norm=max_grad_norm)
        self.net = net
        self.best = copy.deepcopy(net).eval().requires_grad_(False)
        self.optimizer_factory = optimizer
        self.weight_decay = weight_decay
        self.value_coef = value_coef
        self.generation = 0  # how many candidates the gate has accepted
        # Decay conv and linear weights only (not biases or normalisation parameters).
        self._decayed = [p for p in net.parameters() if p.ndim > 1]

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return self.optimizer_factory(self.net.parameters())

    def training_step(self, batch: TensorDictBase, batch_idx: int) -> None:
        logits, value = self.net(batch["planes"])
        losses = alphazero_loss(logits, value, batch, self._decayed, self.weight_decay, self.value_coef)
        self.optimize(losses[LOSS_TOTAL])
        self.accumulate(losses)
        self.live = {"loss": losses[LOSS_TOTAL].detach()}

    def promote(self) -> None:
        """The candidate becomes the network that plays self-play."""
        self.best.load_state_dict(self.net.state_dict())
        self.best.eval()
        self.generation += 1

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["alphazero_generation"] = self.generation

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self.generation = int(checkpoint.get("alphazero_generation", 0))
