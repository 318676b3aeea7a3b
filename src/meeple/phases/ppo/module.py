"""PPO as a LightningModule: clipped surrogate + value loss + entropy bonus, GAE advantages.

The math lives in TorchRL's ``ClipPPOLoss`` and ``GAE``; this module owns the
optimisation schedule and what is logged. Data arrives from
:class:`meeple.phases.ppo.data.RolloutDataModule`, which calls :meth:`compute_advantages`
(handed to it by ``build_ppo``) once per rollout and then hands the whole rollout to one
``training_step`` (its minibatch loop runs here, one optimiser step per minibatch).
``surrogate_coef`` weighs the clipped surrogate (0: the policy moves only by the terms a subclass
adds, e.g. branched values or a guide, and the KL anchor).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping

import torch
from tensordict import TensorDictBase
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE

from meeple.errors import ConfigError
from meeple.phases.aux import AuxTarget, auxiliary_loss
from meeple.phases.base import RolloutModule
from meeple.phases.diagnostics import (
    Member,
    explained_variance,
    gradient_split,
    kl_rows,
    split_actor_critic,
)
from meeple.phases.lr_groups import LRGroup, lr_param_groups
from meeple.phases.ppo.data import RolloutBatch
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
        reference_kl_coef: float = 0.0,
        reference_kl_anneal_fraction: float | None = 0.3,
        diagnostics_every: int = 0,
        lr_groups: Mapping[str, LRGroup] | None = None,
        critic_warmup_rollouts: int = 0,
        aux: Mapping[str, AuxTarget] | None = None,
        surrogate_coef: float = 1.0,
    ) -> None:
        super().__init__(max_grad_norm=max_grad_norm)
        if surrogate_coef < 0:
            raise ConfigError(f"phase.module.surrogate_coef={surrogate_coef}; accepted: a float >= 0")
        self.surrogate_coef = float(surrogate_coef)
        self.diagnostics_every = diagnostics_every  # rollouts between gradient splits; 0: off
        self._probe_due = False
        self._fresh: dict[str, torch.Tensor] = {}  # measured on the rollout before training on it
        self.reference_kl_coef = reference_kl_coef
        self.reference_kl_anneal_fraction = reference_kl_anneal_fraction
        self.reference: torch.nn.Module | None = None  # frozen policy the stage started from
        self.actor = actor
        self.critic = critic
        self.optimizer_factory = optimizer
        self.lr_groups = dict(lr_groups or {})  # parameters with their own learning rate
        self.critic_warmup_rollouts = critic_warmup_rollouts  # first rollouts: value head only
        # what trains then: the critic's own parameters, not the trunk it may share with the actor
        head = split_actor_critic(actor, critic)["critic_head"] if critic_warmup_rollouts else []
        self._critic_head = frozenset(id(p) for p, _ in head)
        self.aux = dict(aux or {})  # auxiliary losses on outputs the actor writes beside its logits
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
        # The critic runs on the rollout and its next states as two plain calls, not under vmap:
        # a network may compute inputs outside torch (features a plugin computes in native code), which
        # vmap's batched tensors cannot reach. Same values either way.
        self.advantage_module = GAE(gamma=gamma, lmbda=gae_lambda, value_network=critic, average_gae=False,
                                    deactivate_vmap=True)

    @property
    def policy(self) -> torch.nn.Module:
        """What the collector acts with (stochastic; greedy under DETERMINISTIC exploration)."""
        return self.actor

    @torch.no_grad()
    def compute_advantages(self, rollout: TensorDictBase) -> TensorDictBase:
        """Writes ``advantage`` and ``value_target`` (A_t = sum_l (gamma*lambda)^l delta_{t+l}),
        and measures the critic on this rollout before any update has seen it."""
        rollout = self.advantage_module(rollout)
        self._fresh = self.fresh_rollout_metrics(rollout)
        every = self.diagnostics_every
        self._probe_due = every > 0 and self.current_epoch % every == 0
        return rollout

    def fresh_rollout_metrics(self, rollout: TensorDictBase) -> dict[str, torch.Tensor]:
        """``train/value_ev_fresh``: explained variance of the value targets by the critic that
        has not trained on them (ClipPPOLoss's ``train/explained_variance`` is measured after);
        the raw advantages' mean and spread (before any normalisation)."""
        advantage = rollout["advantage"]
        return {
            "train/value_ev_fresh": explained_variance(rollout["state_value"], rollout["value_target"]),
            "train/advantage_mean": advantage.mean(),
            "train/advantage_std": advantage.std(),
            "train/value_target_std": rollout["value_target"].std(),
        }

    def rollout_metrics(self) -> dict[str, float | torch.Tensor]:
        return {**super().rollout_metrics(), **self._fresh}

    def diagnostic_groups(self) -> dict[str, list[Member]]:
        """The parameter groups :func:`gradient_split` reports on (subclasses add slices)."""
        return split_actor_critic(self.actor, self.critic)

    # -- KL to the reference policy (a stage that starts from a cloned policy) ---------------
    def wants_reference(self) -> bool:
        return self.reference_kl_coef > 0

    def set_reference_from_actor(self) -> None:
        """Freeze a copy of the current actor (the carried weights) as pi_ref."""
        self.reference = copy.deepcopy(self.actor).requires_grad_(False)

    def reference_kl_weight(self) -> float:
        """beta_t = beta_0 * max(0, 1 - t / (anneal_fraction * T)), t = rollouts done, T = all;
        beta_0 throughout when anneal_fraction is None."""
        if self.reference_kl_anneal_fraction is None:
            return self.reference_kl_coef
        progress = self.current_epoch / max(int(self.trainer.max_epochs or 1), 1)
        return self.reference_kl_coef * max(0.0, 1.0 - progress / self.reference_kl_anneal_fraction)

    def training_step(self, batch: RolloutBatch, batch_idx: int) -> None:
        """One rollout: ``ppo_epochs`` shuffled passes of minibatch steps (see ``RolloutDataset``)."""
        for minibatch in batch:
            self.minibatch_step(minibatch)
        self.log_at_optimizer_steps()

    def minibatch_step(self, batch: TensorDictBase) -> dict[str, torch.Tensor]:
        terms, metrics = self.loss_terms(batch)
        if self._probe_due:  # the first minibatch of a diagnostic rollout
            self._probe_due = False
            self._fresh.update({f"grad/{k}": v for k, v in gradient_split(terms, self.diagnostic_groups()).items()})
        only = None
        if self.current_epoch < self.critic_warmup_rollouts:
            # Critic warm-up: the value head alone learns the RL return; the policy stays as it
            # started, so its first advantages come from a critic of this task, not BC's target.
            only = self._critic_head
            terms = {"critic": terms["critic"]}
        loss = sum(terms.values())
        metrics[LOSS_TOTAL] = loss
        metrics["train/critic_warmup"] = torch.tensor(float(only is not None))
        metrics["train/grad_norm"] = self.optimize(loss, only)
        self.accumulate(metrics)  # logged as per-rollout means
        self.live["loss"] = loss.detach()
        return metrics

    def loss_terms(self, batch: TensorDictBase) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """The loss as named terms (``objective``: the clipped surrogate, ``critic``, ``entropy``,
        ``extra``: :meth:`extra_terms`; their sum is minimised) and the minibatch's metrics."""
        losses = self.loss_module(batch)
        terms = {"objective": self.surrogate_coef * losses["loss_objective"], "critic": losses["loss_critic"]}
        if "loss_entropy" in losses.keys():
            terms["entropy"] = losses["loss_entropy"]
        metrics = {}
        for key in ("loss_objective", "loss_critic", "loss_entropy"):
            if key in losses.keys():
                metrics[f"loss/{key.removeprefix('loss_')}"] = losses[key]
        for key in _DIAGNOSTICS:
            if key in losses.keys():
                metrics[f"train/{key}"] = losses[key].mean()
        cache: dict = {}

        def policy():  # the current policy's distribution on the batch, computed once if asked
            if "dist" not in cache:
                cache["dist"] = self.actor.get_dist(batch)
            return cache["dist"]

        terms["extra"] = self.extra_terms(batch, losses, policy, metrics)
        terms.update(self.policy_terms(batch, policy, metrics))
        if self.aux:
            terms["aux"] = self.aux_terms(batch, policy, metrics)
        return terms, metrics

    def aux_terms(self, batch: TensorDictBase, policy: Callable,
                  metrics: dict[str, torch.Tensor]) -> torch.Tensor | float:  # fmt: skip
        """sum of coef * mean auxiliary loss (``loss/aux_<name>``), on the outputs the actor's
        forward (``policy()``) wrote into ``batch``."""
        policy()
        total: torch.Tensor | float = 0.0
        for name, term in self.aux.items():  # build_ppo_module checked that the actor writes each output
            target = batch.get(term.target)
            if term.transform is not None:
                target = term.transform(target)
            loss = auxiliary_loss(batch.get(term.output), target, term.loss).mean()
            metrics[f"loss/aux_{name}"] = loss.detach()
            total = total + term.coef * loss
        return total

    def policy_terms(self, batch: TensorDictBase, policy: Callable,
                     metrics: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:  # fmt: skip
        """Named loss terms a subclass adds on the current policy (``policy()``), each reported
        on its own by the gradient split; none here."""
        return {}

    def extra_terms(self, batch: TensorDictBase, losses: TensorDictBase, policy: Callable,
                    metrics: dict[str, torch.Tensor]) -> torch.Tensor | float:
        """Terms added to the PPO loss (``policy()``: the current policy's distribution); here
        beta_t * KL(pi || pi_ref) while the reference's weight has not annealed to zero."""
        if self.reference is None or (beta := self.reference_kl_weight()) <= 0:
            return 0.0
        with torch.no_grad():
            reference = self.reference.get_dist(batch)
        kl = categorical_kl(policy(), reference)
        metrics.update({"loss/reference_kl": kl, "train/reference_kl_coef": torch.tensor(beta)})
        return beta * kl

    def make_optimizer(self) -> torch.optim.Optimizer:
        """The optimiser on the loss's parameters, those of ``lr_groups`` at their own rates."""
        params = self.loss_module.parameters()
        if self.lr_groups:
            names = {id(p): name for name, p in self.named_parameters()}
            params = lr_param_groups(params, names, self.lr_groups)
        return self.optimizer_factory(params)

    def configure_optimizers(self):
        return self.with_lr_schedule(self.make_optimizer(), "linear" if self.anneal_lr else "constant")


def categorical_kl(policy, reference) -> torch.Tensor:
    """Mean over the batch of KL(pi || pi_ref) of two masked categoricals (their normalised
    logits), by `meeple.phases.diagnostics.kl_rows`."""
    return kl_rows(policy.logits, reference.logits).mean()
