"""PPO whose policy gradient comes from the decisions that carry a signal
(``phase.module._target_=meeple_mahjong.focus_ppo.FocusPPOModule``).

The change probe (`meeple_mahjong.change_probe`, docs/rl_diagnostics.md section p) splits what a
policy's changes to its start are worth by kind of decision. For the 3-epoch phase-1 gate over its
own 1-epoch clone (0.25 rank better), a changed discard was worth +0.001 reward on average with a
spread of 0.35 over walls, a changed call +0.07 with a spread of 0.49: per decision, a call carries
about 35 times the signal-to-noise of a discard (riichi choices are like calls). Discards are 94% of
the decisions PPO's surrogate averages over, and PPO's own changes after 60 rollouts were worth
0.000 +- 0.008 a change.

This module keeps PPO whole (critic, KL anchor, clip, rates) and gives the clipped surrogate only
the *focus* rows: decisions whose legal actions include one of the kinds named in ``focus``
(``riichi``: a riichi declaration; ``call``: chi, pon or a kan; ``win``: tsumo or ron; ``other``:
nine terminals). Their GAE advantages are normalised over the focus rows of the rollout (mean 0,
spread 1); the other rows' advantages are multiplied by ``other_weight`` after the same
normalisation (0: they move the policy only through the anchor, which holds them at the start).
PPO's own per-minibatch normalisation is off: it would turn the zeros into a constant.
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase

from meeple.errors import ConfigError
from meeple.phases.ppo.module import PPOModule

from .specs import ACTION_KINDS, rows_offering

FOCUS_KINDS = ("riichi", "call", "win", "other")  # kinds whose decisions the surrogate may keep


def focus_advantages(adv: torch.Tensor, rows: torch.Tensor, other_weight: float,
                     normalize: bool = True) -> torch.Tensor:
    """The advantages the surrogate sees: ``adv`` minus the focus rows' mean, over their spread
    (``normalize``), kept on the focus ``rows`` (bool, shaped as ``adv``) and multiplied by
    ``other_weight`` elsewhere."""
    chosen = adv[rows]
    if normalize and chosen.numel() > 1:
        adv = (adv - chosen.mean()) / chosen.std().clamp_min(1e-6)
    return torch.where(rows, adv, other_weight * adv)


class FocusPPOModule(PPOModule):
    def __init__(self, *args: Any, focus: tuple[str, ...] | list[str] = ("riichi", "call"),
                 other_weight: float = 0.0, normalize_advantage: bool = True, **kwargs: Any) -> None:  # fmt: skip
        focus = tuple(focus)
        if not focus or any(k not in FOCUS_KINDS for k in focus):
            raise ConfigError(f"phase.module.focus={list(focus)}; accepted: a non-empty list of {list(FOCUS_KINDS)}")
        if not 0 <= other_weight <= 1:
            raise ConfigError(f"phase.module.other_weight={other_weight}; accepted: a float in [0, 1]")
        # the module normalises over the focus rows itself (module doc)
        super().__init__(*args, normalize_advantage=False, **kwargs)
        self.focus = focus
        self.other_weight = float(other_weight)
        self.normalize = normalize_advantage

    def fresh_rollout_metrics(self, rollout: TensorDictBase) -> dict[str, torch.Tensor]:
        """PPO's, and per focus kind the raw GAE advantage of the decisions that offered it, split
        by whether the rollout took it (``focus/<kind>_advantage_taken`` / ``_declined``) and how
        often it did (``focus/<kind>_taken``): the sign and size of what the surrogate learns there."""
        metrics = super().fresh_rollout_metrics(rollout)
        mask = rollout["action_mask"].reshape(-1, rollout["action_mask"].shape[-1])
        action, adv = rollout["action"].reshape(-1), rollout["advantage"].reshape(-1)
        for kind in self.focus:
            offered = rows_offering(mask, (kind,))
            r = ACTION_KINDS[kind]
            took = offered & (action >= r.start) & (action < r.stop)
            declined = offered & ~took
            metrics[f"focus/{kind}_taken"] = took.sum() / offered.sum().clamp_min(1)
            for name, rows in (("taken", took), ("declined", declined)):
                if rows.any():
                    metrics[f"focus/{kind}_advantage_{name}"] = adv[rows].mean()
        return metrics

    def compute_advantages(self, rollout: TensorDictBase) -> TensorDictBase:
        rollout = super().compute_advantages(rollout)  # GAE and the fresh-rollout metrics on raw advantages
        adv = rollout["advantage"]
        rows = rows_offering(rollout["action_mask"], self.focus).reshape(adv.shape[:-1]).unsqueeze(-1).expand_as(adv)
        self._fresh["focus/fraction"] = rows.float().mean()
        if rows.sum() > 1:
            self._fresh["focus/advantage_std"] = adv[rows].std()
        rollout.set("advantage", focus_advantages(adv, rows, self.other_weight, self.normalize))
        return rollout
