"""The oracle teacher's PPO (phase 2, docs/mahjong_phase2.md): PPO plus what the oracle knows for
certain, that a discard deals in.

Plain PPO from the cloned phase-1 policy did not learn to read the oracle planes in a CPU budget:
a deal-in is a few percent of the learner's discards and its reward is buried in the game's
score and rank noise. But the oracle planes say exactly which discards an opponent can ron
(meeple_mahjong.safety). The safety term is the negative log of the policy's mass on the legal
actions that do not deal in, over the decisions that offer both kinds of action:

    loss += safety_coef * mean_s [ -log sum_{a legal, not dealing} pi(a | s) ]

It is zero for a policy that never deals in when it need not, and it needs no reward. It is
logged with two diagnostics that also measure plain PPO (``safety_coef: 0``):
``oracle/dealing_mass`` (the policy's mass on dealing actions in those decisions) and
``oracle/dealing_rate`` (how often the action the rollout took there dealt in).

With oracle dropout (``env.oracle_keep`` < 1: some decisions see all-zero oracle planes) the labels
come from the env's unmasked ``oracle_truth`` and the dealing mass is also logged on the decisions
played blind, ``oracle/dealing_mass_blind``: whether the public play learns what the oracle shows.
With ``env.oracle_keep: [start, end]`` this module steers the share per rollout, linearly from
start at the first rollout to end at the last (Suphx decays its oracle features to zero, so the
network that ends the phase plays from the public planes); ``oracle/shown_fraction`` logs it.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDictBase

from meeple.errors import ConfigError
from meeple.nets.actor_critic import MASK_KEY
from meeple.phases.diagnostics import Member
from meeple.phases.ppo.module import PPOModule

from .net import ORACLE_KEY
from .safety import avoidable, dealing_actions, discard_kinds
from .specs import SHOWN_KEY, TRUTH_KEY


class OracleTeacherModule(PPOModule):
    """:class:`PPOModule` on an env with the oracle planes (env.oracle=true), with the safety term.
    The actor may read the planes (the teacher) or not (``model.oracle_planes=0``: a public policy
    whose dealing mass the oracle measures, and which the term teaches from the oracle's labels)."""

    def __init__(self, *networks: torch.nn.Module, safety_coef: float = 0.0, **ppo) -> None:
        if not isinstance(safety_coef, int | float) or safety_coef < 0:
            raise ConfigError(
                f"phase.module.safety_coef={safety_coef!r}; accepted: a float >= 0 (0: off)"
            )
        super().__init__(*networks, **ppo)
        self.safety_coef = float(safety_coef)
        self.register_buffer("action_kinds", discard_kinds(), persistent=False)
        self._steered: list[Any] = []  # envs whose oracle_keep follows a [start, end] schedule

    # -- a scheduled oracle dropout (env.oracle_keep: [start, end]) --
    def prepare_env(self, env: Any) -> None:
        """Takes the steering of an env whose ``oracle_keep`` is a schedule (other envs: nothing)."""
        if getattr(env, "oracle_keep_range", None) is None:
            return
        if multiprocessing.parent_process() is not None:  # a collector worker: its env never hears of later rollouts
            raise ConfigError(f"env.oracle_keep={list(env.oracle_keep_range)} in a collector worker process: "
                              "the schedule is steered by the learner; accepted: env.num_workers=1 (an "
                              "in-process collector), or one share")
        self._steered.append(env)
        env.set_oracle_keep(self.scheduled_keep(env.oracle_keep_range, self.current_epoch))

    def scheduled_keep(self, keep_range: tuple[float, float], rollout: int) -> float:
        """Linear from start (rollout 0) to end (the phase's last rollout), then end."""
        start, end = keep_range
        last = max(int(self.trainer.max_epochs or 1) - 1, 1)
        return start + (end - start) * min(rollout / last, 1.0)

    def training_step(self, batch: Any, batch_idx: int) -> None:
        super().training_step(batch, batch_idx)
        for env in self._steered:  # the share the next rollout is collected with
            env.set_oracle_keep(self.scheduled_keep(env.oracle_keep_range, self.current_epoch + 1))

    def _stem_weight(self, suffix: str) -> torch.nn.Parameter | None:
        weights = [p for name, p in self.actor.named_parameters() if name.endswith(suffix)]
        return weights[0] if weights else None

    def oracle_stem(self) -> torch.nn.Parameter | None:
        """The oracle planes' convolution weight in the actor's stem, (channels, oracle planes,
        kernel); None for an actor that reads public planes only (model.oracle_planes=0: the
        safety term and the diagnostics then measure a public policy against the oracle's labels)."""
        return self._stem_weight(".oracle_stem.weight")

    def diagnostic_groups(self) -> dict[str, list[Member]]:
        """Also the stem's weights on the oracle planes (they start at zero) and on the public ones."""
        groups = {**super().diagnostic_groups(), "public_stem": [(self._stem_weight(".stem.0.weight"), None)]}
        if (oracle := self.oracle_stem()) is not None:
            groups["oracle_stem"] = [(oracle, None)]
        return groups

    def choices(self, batch: TensorDictBase) -> tuple[torch.Tensor, ...]:
        """(legal mask, dealing actions, rows that offer a dealing and a safe action, rows whose
        taken action dealt in) of a flat batch of decisions."""
        if ORACLE_KEY not in batch.keys():
            raise ConfigError(
                "the oracle teacher's batch has no oracle planes; accepted: env.oracle=true "
                "with model.oracle_planes=205"
            )
        mask = batch[MASK_KEY].bool()
        truth = batch[TRUTH_KEY] if TRUTH_KEY in batch.keys() else batch[ORACLE_KEY]  # env.oracle_keep < 1
        dealing = dealing_actions(truth, mask, self.action_kinds)
        chosen = avoidable(dealing, mask).any(-1)  # a choice between both kinds of action
        took = dealing.gather(-1, batch["action"].reshape(-1, 1)).squeeze(-1) & chosen
        return mask, dealing, chosen, took

    def fresh_rollout_metrics(self, rollout: TensorDictBase) -> dict[str, torch.Tensor]:
        """Also the advantages of the decisions that offered a dealing and a safe discard, by which
        kind the rollout took (their sign and size are the whole learning signal for avoiding
        deal-ins), how many took a dealing one, and the oracle stem's weight norm."""
        metrics = super().fresh_rollout_metrics(rollout)
        flat = rollout.reshape(-1)
        _, _, chosen, took = self.choices(flat)
        safe = chosen & ~took
        advantage, reward = flat["advantage"].reshape(-1), flat["next", "reward"].reshape(-1)

        def mean(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
            return (x * rows).sum() / rows.sum().clamp_min(1)

        metrics.update({
            "oracle/dealing_taken": took.sum().float(),
            "oracle/advantage_dealing": mean(advantage, took),
            "oracle/advantage_safe": mean(advantage, safe),
            "oracle/reward_dealing": mean(reward, took),
            "oracle/reward_safe": mean(reward, safe),
        })
        if (oracle := self.oracle_stem()) is not None:
            metrics["oracle/stem_weight_norm"] = oracle.detach().norm()
        if SHOWN_KEY in flat.keys():
            metrics["oracle/shown_fraction"] = flat[SHOWN_KEY].float().mean()
        if "active" in flat.keys():
            metrics["train/active_fraction"] = flat["active"].float().mean()
        return metrics

    def extra_terms(self, batch: TensorDictBase, losses: TensorDictBase, policy: Callable,
                    metrics: dict[str, torch.Tensor]) -> torch.Tensor | float:
        extra = super().extra_terms(batch, losses, policy, metrics)
        mask, dealing, chosen, took = self.choices(batch)
        # Masked sums, not boolean indexing: no data-dependent shape, so no device sync per minibatch.
        rows = chosen.sum().clamp_min(1)
        log_p = torch.log_softmax(policy().logits.clamp_min(-1e9), -1)
        log_safe = torch.logsumexp(log_p.masked_fill(~(mask & ~dealing), -torch.inf), -1)
        log_safe = torch.where(chosen, log_safe, 0.0)  # rows without a choice count nothing
        dealing_mass = -torch.expm1(log_safe).detach()  # per row; 0 where there is no choice
        metrics["oracle/dealing_mass"] = dealing_mass.sum() / rows
        metrics["oracle/dealing_rate"] = took.sum() / rows
        metrics["oracle/choice_fraction"] = chosen.float().mean()
        if SHOWN_KEY in batch.keys():  # oracle dropout: the decisions played from the public planes
            blind = chosen & ~batch[SHOWN_KEY].reshape(chosen.shape)
            metrics["oracle/dealing_mass_blind"] = (dealing_mass * blind).sum() / blind.sum().clamp_min(1)
        if self.safety_coef == 0:
            return extra
        safety = -log_safe.sum() / rows
        metrics["loss/oracle_safety"] = safety.detach()
        return extra + self.safety_coef * safety
