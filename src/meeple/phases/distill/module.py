"""Oracle guiding (Suphx-style): PPO for a public-information student, pulled towards a frozen
teacher that also reads privileged planes, whose privileged input is gradually dropped.

Per minibatch the student minimises

    L = L_PPO + lambda_KL * KL(pi_s || pi_t^tau) + lambda_anchor * KL(pi_s || pi_anchor)

- ``pi_t^tau``: the teacher's masked softmax at temperature tau, on the same observation with
  each privileged plane kept with the current oracle stage's probability for its group (zeros
  otherwise; one Bernoulli per sample and plane, from a seeded generator);
- ``pi_anchor``: the frozen policy the stage started from (PPO's reference KL, annealed by
  ``phase.reference_kl``): the student cannot drift far from its behavioral clone early on;
- oracle stages (``distill.schedule``) set the keep probabilities and lambda_KL; a stage ends
  after ``advance.max_rollouts`` rollouts or earlier when ``advance.metric`` stops improving
  (not before ``advance.min_rollouts``; :class:`meeple.phases.distill.schedule.OracleClock`).
  After the last stage (the *final* stretch) the learning rate drops by ``final.lr_factor`` and
  the clipped surrogate gives way to the truncated importance-weighted policy gradient
  -E[min(rho, c) A log pi_s(a|s)], rho = pi_s(a|s) / mu(a|s) with mu the policy that collected
  the sample (IMPALA's truncation; later PPO epochs reuse samples off-policy).

Logged per rollout: ``distill/oracle_stage`` (0-based; len(schedule) in the final stretch),
``distill/kl_coef``, ``distill/keep_<group>``, ``distill/lr``, ``loss/teacher_kl`` and, in the
final stretch, ``distill/is_weight``. The schedule's position is part of the checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDictBase

from meeple.errors import ConfigError
from meeple.phases.distill.schedule import OracleClock
from meeple.phases.distill.schema import Distill
from meeple.phases.ppo.module import PPOModule

_STATE_KEY = "distill_schedule"


def drop_planes(planes: torch.Tensor, keep: Mapping[str, float], groups: Mapping[str, Sequence[int]],
                generator: torch.Generator) -> torch.Tensor:  # fmt: skip
    """``planes`` (..., planes, width) with each plane of each group kept with the group's
    probability in ``keep``, else zero; one draw per sample and plane (the privileged input an
    oracle stage gives the teacher)."""
    if all(p >= 1.0 for p in keep.values()):
        return planes
    scale = torch.ones(planes.shape[:-1], device=planes.device)  # (..., planes)
    for name, p in keep.items():
        lo, hi = groups[name]
        draw = torch.rand((*planes.shape[:-2], hi - lo), generator=generator)
        scale[..., lo:hi] = (draw < p).to(scale)
    return planes * scale.unsqueeze(-1)


class DistillModule(PPOModule):
    def __init__(self, actor: torch.nn.Module, critic: torch.nn.Module, *, distill: Distill,
                 make_teacher: Callable[[dict[str, Any], Path], torch.nn.Module], dropout_seed: int,
                 **ppo: Any) -> None:
        super().__init__(actor, critic, **ppo)
        self.distill = distill
        self.make_teacher = make_teacher
        self.teacher: torch.nn.Module | None = None
        self.generator = torch.Generator().manual_seed(dropout_seed)
        self.normalize_advantage = bool(ppo.get("normalize_advantage", True))
        self.clock = OracleClock(distill)  # which oracle stage, or the final stretch

    # -- the teacher ---------------------------------------------------------------------
    def set_teacher(self, checkpoint: dict[str, Any], file: Path) -> None:
        """Freeze the teacher from its gate (called by the stage's transition before training)."""
        teacher = self.make_teacher(checkpoint, file)
        if self.distill.privileged_key not in teacher.in_keys:
            raise ConfigError(f"transition.teacher: the teacher in {file} does not read {self.distill.privileged_key!r} "
                              f"(it reads {teacher.in_keys}); accepted: a gate of a stage trained with the privileged "
                              "planes (e.g. model.oracle_planes=N, env.oracle=true)")
        self.teacher = teacher.requires_grad_(False).eval()

    def on_fit_start(self) -> None:
        if self.teacher is None:
            raise ConfigError("phase=distill ran without a teacher: set transition.teacher=<stage>")
        self.teacher.eval()
        if self.device.type == "cuda":  # frozen: bf16 halves its memory and time
            self.teacher.to(torch.bfloat16)

    def train(self, mode: bool = True):
        super().train(mode)
        if self.teacher is not None:
            self.teacher.eval()  # frozen, whatever Lightning does to the rest
        return self

    @torch.no_grad()
    def teacher_log_probs(self, batch: TensorDictBase) -> torch.Tensor:
        """log pi_t^tau(.|s) with the current stage's privileged-plane dropout."""
        td = batch.clone(recurse=False)
        key = self.distill.privileged_key
        td.set(key, self.drop_planes(batch.get(key)))
        dtype = next(self.teacher.parameters()).dtype
        if dtype != torch.float32:
            for k in self.teacher.in_keys:
                if td.get(k).is_floating_point():
                    td.set(k, td.get(k).to(dtype))
        logits = self.teacher.get_dist(td).logits.float().clamp_min(-1e9)
        return torch.log_softmax(logits / self.distill.temperature, dim=-1)

    def drop_planes(self, planes: torch.Tensor) -> torch.Tensor:
        """The current oracle stage's :func:`drop_planes`."""
        return drop_planes(planes, self.clock.keep_probabilities(), self.distill.groups, self.generator)

    # -- the schedule --------------------------------------------------------------------
    def enter_final(self) -> None:
        """The final stretch: lower the learning rate (the clock already says final)."""
        factor = self.distill.final.lr_factor
        scheduler = self.lr_schedulers()
        if scheduler is not None:  # the schedule multiplies its base rates: lower those
            scheduler.base_lrs = [lr * factor for lr in scheduler.base_lrs]
        for group in self.optimizers().param_groups:
            group["lr"] *= factor

    # -- the loss ------------------------------------------------------------------------
    def extra_terms(self, batch: TensorDictBase, losses: TensorDictBase, policy: Callable,
                    metrics: dict[str, torch.Tensor]) -> torch.Tensor | float:
        extra = super().extra_terms(batch, losses, policy, metrics)  # the anchor
        kl_coef = self.clock.kl_coef()
        metrics["distill/oracle_stage"] = torch.tensor(float(self.clock.stage))
        metrics["distill/kl_coef"] = torch.tensor(kl_coef)
        for name, p in self.clock.keep_probabilities().items():
            metrics[f"distill/keep_{name}"] = torch.tensor(p)
        metrics["distill/lr"] = torch.tensor(self.optimizers().param_groups[0]["lr"])
        if kl_coef > 0:
            log_q = self.teacher_log_probs(batch)
            log_p = policy().logits.clamp_min(-1e9)
            log_p = torch.log_softmax(log_p, dim=-1)
            kl = (log_p.exp() * (log_p - log_q)).sum(-1).mean()  # KL(pi_s || pi_t^tau)
            metrics["loss/teacher_kl"] = kl.detach()
            extra = extra + kl_coef * kl
        if self.clock.final:
            objective, weight = self.truncated_is_objective(batch, policy())
            metrics["distill/is_weight"] = weight
            extra = extra + objective - losses["loss_objective"]  # replaces the clipped surrogate
        return extra

    def truncated_is_objective(self, batch: TensorDictBase, dist) -> tuple[torch.Tensor, torch.Tensor]:
        """-E[min(rho, c) A log pi(a|s)] (weights detached) and the mean weight."""
        keys = self.loss_module.tensor_keys
        log_prob = dist.log_prob(batch.get(keys.action))
        behaviour = batch.get(keys.sample_log_prob).reshape(log_prob.shape)
        advantage = batch.get(keys.advantage).reshape(log_prob.shape)
        if self.normalize_advantage and advantage.numel() > 1:
            advantage = (advantage - advantage.mean()) / advantage.std().clamp_min(1e-8)
        weight = (log_prob.detach() - behaviour).exp().clamp(max=self.distill.final.is_truncation)
        return -(weight * advantage * log_prob).mean(), weight.mean()

    def on_train_epoch_end(self) -> None:
        count = max(self._count, 1)
        rollout = {k: (v / count).item() for k, v in self._sums.items()}
        super().on_train_epoch_end()  # logs this rollout under the stage it ran in
        if self.clock.after_rollout(rollout):
            self.enter_final()

    # -- checkpoint ----------------------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint[_STATE_KEY] = dict(self.clock.state_dict(), generator=self.generator.get_state())

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        state = checkpoint.get(_STATE_KEY)
        if state is None:
            raise ConfigError("this checkpoint has no distillation schedule state: it was not written by phase=distill")
        self.clock.load_state_dict(state)
        self.generator.set_state(state["generator"])
