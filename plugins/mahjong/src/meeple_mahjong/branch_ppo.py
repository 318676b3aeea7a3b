"""PPO with branched action values (``phase.module._target_=meeple_mahjong.branch_ppo.BranchPPOModule``).

The env (``env.branch``, `meeple_mahjong.branch`) writes, at some decisions, the value of each of
the policy's most likely actions from copies of the table that share the wall and every random
draw. This module turns them into a policy loss: the all-action form of PPO's clipped surrogate
over those candidates,

    L_branch = - mean_s sum_{a in C(s)} mu(a) min(r(a) A(a), clip(r(a), 1 - eps, 1 + eps) A(a)),
    r(a) = pi_C(a) / mu(a),   A(a) = Q(s, a) - sum_b mu(b) Q(s, b),

where pi_C is the current policy renormalised over the candidates C(s) and mu the same at
collection (``branch_prior``). Unclipped, its gradient is sum_a grad pi_C(a) A(a): every candidate's
value counts, not one sampled action's return. The advantages are divided by their spread over
the minibatch's candidates (floored), as PPO normalises its own.

``surrogate_coef`` weighs PPO's usual clipped surrogate on GAE advantages (0: the branches alone
move the policy); the critic, the KL anchor and the rest are PPO's. The module hands its actor to
the env (`prepare_env`), so the branches play the policy being trained.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDictBase

from meeple.errors import ConfigError
from meeple.nets.policy_fn import logits_fn
from meeple.phases.ppo.module import PPOModule

from .branch import candidate_advantages, candidate_probs

_ADV_FLOOR = 0.05  # reward units (500 points): a minibatch of near-ties is not blown up to unit spread


def branch_surrogate(logits: torch.Tensor, value: torch.Tensor, mask: torch.Tensor, prior: torch.Tensor,
                     clip_epsilon: float) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:  # fmt: skip
    """L_branch of the module doc over branched rows ([N, A] each; ``mask``: the candidates) and
    its diagnostics."""
    pc = candidate_probs(logits, mask)
    adv = candidate_advantages(value, mask, prior)
    spread = adv[mask].std() if mask.sum() > 1 else torch.tensor(1.0)
    adv_n = adv / spread.clamp_min(_ADV_FLOOR)
    ratio = torch.where(mask, pc / prior.clamp_min(1e-8), torch.ones_like(pc))
    clipped = ratio.clamp(1 - clip_epsilon, 1 + clip_epsilon)
    surrogate = torch.minimum(ratio * adv_n, clipped * adv_n)
    loss = -(prior * surrogate).sum(-1).mean()
    tie = (adv.abs().amax(-1) == 0).float().mean()
    return loss, {
        "branch/advantage_spread": spread.detach(),
        "branch/tie_fraction": tie,  # decisions whose candidates all ended the hand alike
        "branch/clip_fraction": ((ratio - 1).abs() > clip_epsilon)[mask].float().mean(),
        "branch/best_mass": (pc * (value >= value.masked_fill(~mask, float("-inf")).amax(-1, keepdim=True)).float()
                             ).sum(-1).mean().detach(),  # fmt: skip
    }


class BranchPPOModule(PPOModule):
    def __init__(self, *args: Any, branch_coef: float = 1.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # surrogate_coef: PPOModule's
        if branch_coef < 0:
            raise ConfigError(f"phase.module.branch_coef={branch_coef}; accepted: a float >= 0")
        self.branch_coef = branch_coef
        self.clip_epsilon = float(self.loss_module.clip_epsilon)

    def prepare_env(self, env: Any) -> None:
        """The env's branches play this module's actor (in-process collectors: the same weights)."""
        if not hasattr(env, "set_branch_policy") or getattr(env, "_branch", None) is None:
            raise ConfigError("phase.module=BranchPPOModule needs env.branch (e.g. {prob: 0.25, candidates: 4}); "
                              "accepted: env=mahjong with env.branch set")
        env.set_branch_policy(logits_fn(self.actor))

    def fresh_rollout_metrics(self, rollout: TensorDictBase) -> dict[str, torch.Tensor]:
        """PPO's, and how its GAE advantage of the action taken compares with the branches' on the
        decisions where that action was a candidate: ``branch/gae_corr`` (squared: about the share
        of the GAE advantage's variance that is the action's effect rather than the wall's),
        ``branch/advantage_taken_std`` and ``branch/gae_std_branched``."""
        metrics = super().fresh_rollout_metrics(rollout)
        mask = rollout["branch_mask"].reshape(-1, rollout["branch_mask"].shape[-1])
        action = rollout["action"].reshape(-1, 1)
        taken = mask.gather(-1, action).squeeze(-1)
        if taken.sum() < 3:
            return metrics
        value = rollout["branch_value"].reshape(mask.shape)[taken]
        prior = rollout["branch_prior"].reshape(mask.shape)[taken]
        branch = candidate_advantages(value, mask[taken], prior).gather(-1, action[taken]).squeeze(-1)
        gae = rollout["advantage"].reshape(-1)[taken]
        metrics["branch/advantage_taken_std"] = branch.std()
        metrics["branch/gae_std_branched"] = gae.std()
        if branch.std() > 0 and gae.std() > 0:
            metrics["branch/gae_corr"] = torch.corrcoef(torch.stack([gae, branch]))[0, 1]
        return metrics

    def policy_terms(self, batch: TensorDictBase, policy: Callable,
                     metrics: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:  # fmt: skip
        mask = batch.get("branch_mask", None)
        if mask is None:
            raise ConfigError("BranchPPOModule: the rollout has no branch_mask; accepted: env.branch set")
        rows = mask.any(-1)
        metrics["branch/rows"] = rows.float().mean()
        if not rows.any():
            return {}
        loss, m = branch_surrogate(policy().logits[rows], batch["branch_value"][rows], mask[rows],
                                   batch["branch_prior"][rows], self.clip_epsilon)  # fmt: skip
        metrics.update(m)
        metrics["loss/branch"] = loss.detach()
        return {"branch": self.branch_coef * loss}
