"""DQN for one independent agent, built from TorchRL pieces.

- :func:`make_dqn_model`: the agent's whole learnable state as one ``nn.Module``: TorchRL's
  ``DQNLoss`` around a ``QValueActor`` (MLP). Its ``state_dict`` holds the online network
  (``value_network_params``) *and* the target network (``target_value_network_params``), so
  one ``load_state_dict`` moves a consistent snapshot of both; this is what the multi-agent
  topology keeps in shared memory.
- :class:`DQNUpdate`: one gradient step on a replay sample (loss, clipping, optimiser, target
  update with ``SoftUpdate`` or ``HardUpdate``).
- :func:`make_exploration`: ``EGreedyModule`` with linear epsilon decay for acting.

The math is TorchRL's: ``DQNLoss`` computes the TD(0) target
``y = r + gamma * (1 - terminated) * Q_target(s', argmax_a Q(s', a))`` (double DQN) or
``... max_a Q_target(s', a)`` and regresses ``Q(s, a)`` on it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictSequential
from torch import nn
from torchrl.data import Categorical
from torchrl.modules import MLP, EGreedyModule, QValueActor
from torchrl.objectives import DQNLoss, HardUpdate, SoftUpdate

from meeple.errors import ConfigError

TARGET_UPDATES = ("soft", "hard")
LOSS_FUNCTIONS = ("l2", "smooth_l1")


@dataclass(frozen=True)
class DQNSpec:
    """What defines an agent's network and loss (identical in every process that rebuilds it)."""

    obs_dim: int
    num_actions: int
    hidden: tuple[int, ...] = (64, 64)
    gamma: float = 0.95
    double_dqn: bool = True
    loss_function: str = "l2"


def make_dqn_model(spec: DQNSpec) -> DQNLoss:
    """The agent's model: ``DQNLoss`` holding online + target Q-networks (``.value_network`` acts)."""
    if spec.loss_function not in LOSS_FUNCTIONS:
        raise ConfigError(
            f"phase.loss_function={spec.loss_function!r}; accepted: {', '.join(LOSS_FUNCTIONS)}"
        )
    action_spec = Categorical(spec.num_actions)
    net = MLP(in_features=spec.obs_dim, out_features=spec.num_actions, num_cells=list(spec.hidden))
    actor = QValueActor(net, in_keys=["observation"], spec=action_spec)
    loss = DQNLoss(
        actor,
        loss_function=spec.loss_function,
        delay_value=True,  # a target network, updated by SoftUpdate / HardUpdate
        double_dqn=spec.double_dqn,
        action_space=action_spec,
    )
    loss.make_value_estimator(gamma=spec.gamma)
    return loss


def make_target_updater(
    model: DQNLoss, kind: str, *, tau: float, hard_interval: int
) -> SoftUpdate | HardUpdate:
    """``soft``: theta' <- (1 - tau) theta' + tau theta every step; ``hard``: copy every ``hard_interval``."""
    if kind == "soft":
        return SoftUpdate(model, tau=tau)
    if kind == "hard":
        return HardUpdate(model, value_network_update_interval=hard_interval)
    raise ConfigError(f"phase.target_update.kind={kind!r}; accepted: {', '.join(TARGET_UPDATES)}")


class DQNUpdate:
    """Gradient steps for one agent: loss -> backward -> clip -> optimiser -> target update.

    The optimiser is bound to the model's current parameters; call :meth:`reset_optimizer`
    after loading weights into the model from elsewhere (moments of other weights are stale).
    """

    def __init__(
        self,
        model: DQNLoss,
        make_optimizer: Callable[..., torch.optim.Optimizer],
        *,
        target_update: str = "soft",
        tau: float = 0.01,
        hard_interval: int = 500,
        max_grad_norm: float | None = 10.0,
    ) -> None:
        self.model = model
        self.make_optimizer = make_optimizer
        self.max_grad_norm = max_grad_norm
        self.target = make_target_updater(
            model, target_update, tau=tau, hard_interval=hard_interval
        )
        self.optimizer = make_optimizer(model.parameters())
        self.updates = 0

    def reset_optimizer(self) -> None:
        self.optimizer = self.make_optimizer(self.model.parameters())

    def step(self, batch: TensorDictBase) -> dict[str, float]:
        """One update on ``batch`` (keys: observation, action, next.{observation, reward, done, terminated})."""
        losses = self.model(batch)
        loss = losses["loss"]
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = (
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
            if self.max_grad_norm is not None
            else torch.zeros(())
        )
        self.optimizer.step()
        self.target.step()
        self.updates += 1
        return {"loss": float(loss.detach()), "grad_norm": float(grad_norm)}


def make_exploration(
    model: DQNLoss, num_actions: int, *, eps_init: float, eps_end: float, annealing_steps: int
) -> tuple[nn.Module, EGreedyModule]:
    """(epsilon-greedy policy over ``model.value_network``, its ``EGreedyModule`` to ``.step()``)."""
    egreedy = EGreedyModule(
        Categorical(num_actions),
        eps_init=eps_init,
        eps_end=eps_end,
        annealing_num_steps=annealing_steps,
    )
    return TensorDictSequential(model.value_network, egreedy), egreedy
