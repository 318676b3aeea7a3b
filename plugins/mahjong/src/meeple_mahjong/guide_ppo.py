"""PPO kickstarted by a bot (``phase.module._target_=meeple_mahjong.guide_ppo.GuidePPOModule``).

With ``env.guide: rule`` the env writes, at every learner decision with a choice, the action the
rule bot would take in the learner's seat (``guide_action``; -1 elsewhere). This module adds to
PPO's loss the cross-entropy of the current policy on those actions,

    L = L_PPO + guide_coef * mean_s [-log pi(a_guide(s) | s)],

on the states the policy itself reaches (DAgger's labels; kickstarting, Schmitt et al. 2018, with a
constant weight). Phase 1 clones the rule bot from the bot's own games and agrees with it on ~86% of
its decisions against three rule bots; the bot places ~0.05 better than its clone
(docs/rl_diagnostics.md section t): the term fills the clone's gap on the states it visits,
where PPO's own signal per decision is below its noise (sections o-s). ``surrogate_coef`` weighs
PPO's clipped surrogate (0: the guide and the anchor alone, the control that says what PPO adds).
Logged: ``loss/guide`` and ``guide/agree`` (the policy's argmax is the guide's choice).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDictBase

from meeple.errors import ConfigError
from meeple.phases.ppo.module import PPOModule


def guide_loss(log_probs: torch.Tensor, guide: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean cross-entropy of ``log_probs`` [N, A] (normalised over the legal actions) on the
    guide's actions [N] (rows with -1 left out), and the share of rows whose argmax is the
    guide's; (0, nan) when no row has a guide."""
    rows = guide >= 0
    if not rows.any():
        return log_probs.sum() * 0.0, torch.tensor(float("nan"))
    lp, g = log_probs[rows], guide[rows]
    ce = -lp.gather(-1, g.unsqueeze(-1)).mean()
    return ce, (lp.argmax(-1) == g).float().mean().detach()


class GuidePPOModule(PPOModule):
    def __init__(self, *args: Any, guide_coef: float = 1.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # surrogate_coef: PPOModule's
        if guide_coef < 0:
            raise ConfigError(f"phase.module.guide_coef={guide_coef}; accepted: a float >= 0")
        self.guide_coef = float(guide_coef)

    def prepare_env(self, env: Any) -> None:
        if getattr(env, "guide", None) is None:
            raise ConfigError("phase.module=GuidePPOModule needs the env's guide; accepted: env=mahjong with "
                              "env.guide: rule")

    def policy_terms(self, batch: TensorDictBase, policy: Callable,
                     metrics: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:  # fmt: skip
        guide = batch.get("guide_action", None)
        if guide is None:
            raise ConfigError("GuidePPOModule: the rollout has no guide_action; accepted: env.guide: rule")
        loss, agree = guide_loss(policy().logits, guide.reshape(-1))
        metrics["loss/guide"] = loss.detach()
        metrics["guide/agree"] = agree
        return {"guide": self.guide_coef * loss}
