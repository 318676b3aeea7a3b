"""Behavioral cloning as a LightningModule: masked cross-entropy on the expert's action, plus an
optional value regression on the recorded return-to-go and optional auxiliary losses on outputs
of the model's ``aux`` module (``phase.aux``).

``actor`` and ``critic`` come from the same model factory as PPO (``conf/model``), so the state
dict holds ``actor.*`` and ``critic.*`` exactly like :class:`meeple.phases.ppo.module.PPOModule` and
the next phase loads them as they are. Optimisation is manual (as in ``phases/base.py``: one
optimiser step per minibatch, the LR schedule stepped per step), and metrics are summed over
the samples of an epoch and logged once at its end.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

import lightning as L
import torch
import torch.nn.functional as F
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictSequential

from meeple.phases.aux import AuxTarget, auxiliary_loss
from meeple.phases.lr_schedule import lr_factor

# Metric keys (stable: dashboards, sweeps, early stopping and the pipeline's gates read them).
LOSS_BC = "loss/bc"
LOSS_POLICY_CE = "loss/policy_ce"
LOSS_VALUE = "loss/value"
TRAIN_ACCURACY = "train/accuracy"
TRAIN_TOP3 = "train/accuracy_top3"
TRAIN_LR = "train/lr"
TRAIN_GRAD_NORM = "train/grad_norm"  # before clipping, mean over the optimiser steps logged
VAL_POLICY_CE = "val/policy_ce"
VAL_ACCURACY = "val/accuracy"
VAL_TOP3 = "val/accuracy_top3"
VAL_VALUE_MSE = "val/value_mse"
# Per auxiliary loss / per action category: f"loss/aux_{name}", f"val/aux_{name}",
# f"train/accuracy_{category}", f"val/accuracy_{category}".
SAMPLES_PER_S = "perf/samples_per_s"
TRAIN_SAMPLES = "train/samples"  # training samples seen so far (the x axis of BC's curves)
# The phase's best checkpoint: lowest validation cross-entropy.
BEST_METRIC, BEST_MODE = VAL_POLICY_CE, "min"


def masked_cross_entropy(
    logits: torch.Tensor, action: torch.Tensor, mask: torch.Tensor | None
) -> torch.Tensor:
    """Per-sample -log pi(a* | s) with pi = softmax over the legal actions only.

    Illegal logits are set to the dtype's lowest value before the softmax, so they take no
    probability and get no gradient; ``a*`` (the expert's action) must be legal.
    """
    if mask is not None:
        logits = logits.masked_fill(~mask, torch.finfo(logits.dtype).min)
    return -F.log_softmax(logits, dim=-1).gather(-1, action.unsqueeze(-1)).squeeze(-1)


def greedy_actions(logits: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """argmax over the legal actions (what the greedy policy plays)."""
    if mask is not None:
        logits = logits.masked_fill(~mask, torch.finfo(logits.dtype).min)
    return logits.argmax(-1)


def in_top_k(
    logits: torch.Tensor, action: torch.Tensor, mask: torch.Tensor | None, k: int
) -> torch.Tensor:
    """Per sample: whether ``action`` is among the ``k`` most likely legal actions."""
    if mask is not None:
        logits = logits.masked_fill(~mask, torch.finfo(logits.dtype).min)
    top = logits.topk(min(k, logits.shape[-1]), dim=-1).indices
    return (top == action.unsqueeze(-1)).any(-1)


def weighted_mean(per_sample: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
    """mean_i l_i, or sum_i w_i l_i / sum_i w_i with per-sample weights."""
    if weight is None:
        return per_sample.mean()
    weight = weight.reshape(-1).to(per_sample.dtype)
    return (weight * per_sample).sum() / weight.sum().clamp_min(torch.finfo(per_sample.dtype).tiny)


def bc_loss(
    logits: torch.Tensor,
    action: torch.Tensor,
    mask: torch.Tensor | None,
    value: torch.Tensor | None,
    target_return: torch.Tensor | None,
    value_coef: float,
    weight: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """L = mean_i CE_i + value_coef * mean_i (V(s_i) - G_i)^2, and its parts as per-sample sums.

    The value term is left out (``value`` None) when value_coef is 0 or the data has no returns.
    With ``weight`` the means are weighted (sum_i w_i l_i / sum_i w_i); the metric sums are not.
    Sums (not means) so an epoch's metrics weigh every sample once, whatever the batch sizes.
    """
    ce = masked_cross_entropy(logits, action, mask)
    loss = weighted_mean(ce, weight)
    detached = logits.detach()
    correct = greedy_actions(detached, mask) == action
    parts = {
        "ce_sum": ce.detach().sum(),
        "correct_sum": correct.float().sum(),
        "top3_sum": in_top_k(detached, action, mask, 3).float().sum(),
        "correct": correct,  # per sample, for the per-category accuracies
    }
    if value is not None:
        squared = (value.reshape(-1) - target_return.reshape(-1)).float().pow(2)
        loss = loss + value_coef * weighted_mean(squared, weight)
        parts["value_sum"] = squared.detach().sum()
    parts["loss"] = loss
    return parts


def category_sums(
    correct: torch.Tensor, category: torch.Tensor, categories: Mapping[str, Sequence[int]]
) -> dict[str, torch.Tensor]:
    """Per named group of action categories: greedy hits and samples (``hit_{name}_sum``,
    ``n_{name}_sum``), e.g. ``{"call": [2, 3, 4]}`` counts chi, pon and kan together."""
    sums = {}
    category = category.reshape(-1)
    for name, ids in categories.items():
        member = torch.isin(category, torch.as_tensor(list(ids), device=category.device))
        sums[f"hit_{name}_sum"] = (correct & member).float().sum()
        sums[f"n_{name}_sum"] = member.float().sum()
    return sums


def as_tensordict(batch: TensorDictBase | Mapping[str, torch.Tensor]) -> TensorDictBase:
    """A data module's batch as a TensorDict (plugins' loaders may yield plain dicts of tensors)."""
    if isinstance(batch, TensorDictBase):
        return batch
    if not isinstance(batch, Mapping) or "action" not in batch:
        raise TypeError(
            f"a BC batch must be a TensorDict or a dict of tensors with an 'action' key; got {type(batch).__name__}"
            + (f" with keys {sorted(batch)}" if isinstance(batch, Mapping) else "")
        )
    return TensorDict(dict(batch), batch_size=[len(batch["action"])])


def param_groups(
    module: torch.nn.Module, no_decay_norms_biases: bool
) -> list[dict] | list[torch.nn.Parameter]:
    """The module's parameters, or two AdamW groups: weights (the optimiser's weight decay) and
    norms' scales and biases (every parameter of at most one dimension) without decay."""
    params = [p for p in module.parameters() if p.requires_grad]
    if not no_decay_norms_biases:
        return params
    return [
        {"params": [p for p in params if p.ndim > 1]},
        {"params": [p for p in params if p.ndim <= 1], "weight_decay": 0.0},
    ]


def warmup_cosine(
    total_steps: int, warmup: float, schedule: str, floor: float = 0.0
) -> Callable[[int], float]:
    """LR factor at optimiser step s: linear warm-up over ``warmup * total_steps`` steps, then
    cosine decay to ``floor`` at ``total_steps`` (``schedule='cosine'``) or constant."""
    return lr_factor(total_steps, schedule, warmup=int(warmup * total_steps), floor=floor, warmup_first=True)


def shared_trunk(actor: torch.nn.Module, critic: torch.nn.Module) -> torch.nn.Module | None:
    """The trunk an actor and a critic share (``meeple.nets.actor_critic.shared_heads``: two
    sequences starting with the same module), or None. BC then runs it once per batch rather than
    once per head (a 40-block trunk is nearly all of the compute)."""
    first = getattr(actor, "module", None), getattr(critic, "module", None)
    if not all(isinstance(m, torch.nn.ModuleList) and len(m) >= 2 for m in first):
        return None
    return first[0][0] if first[0][0] is first[1][0] else None


class BCModule(L.LightningModule):
    def __init__(
        self,
        actor: torch.nn.Module,
        critic: torch.nn.Module,
        *,
        optimizer: Callable[..., torch.optim.Optimizer],
        value_coef: float,
        max_grad_norm: float | None,
        warmup: float = 0.0,
        schedule: str = "cosine",
        lr_floor: float = 0.0,
        no_decay_norms_biases: bool = False,
        aux: torch.nn.Module | None = None,
        aux_targets: Mapping[str, AuxTarget] | None = None,
        aux_coef: float = 0.0,
        weight_key: str | None = None,
        categories: Mapping[str, Sequence[int]] | None = None,
    ) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.actor = actor
        self.critic = critic
        self.aux = aux  # writes the outputs aux_targets read (the model factory's with_aux module)
        self.optimizer_factory = optimizer
        self.value_coef = value_coef
        self.max_grad_norm = max_grad_norm
        self.warmup = warmup
        self.schedule = schedule
        self.lr_floor = lr_floor
        self.no_decay_norms_biases = no_decay_norms_biases
        self.aux_targets = dict(aux_targets or {})
        if self.aux_targets and aux is None:
            raise ValueError("auxiliary losses need the model's aux module; the model built none")
        self.aux_coef = aux_coef
        self.weight_key = weight_key
        self.categories = {name: list(ids) for name, ids in (categories or {}).items()}
        # Kept out of the module tree (its weights are the actor's and the critic's already).
        object.__setattr__(self, "trunk", shared_trunk(actor, critic))
        self._sums: dict[str, dict[str, torch.Tensor]] = {"train": {}, "val": {}}
        self._counts = {"train": 0, "val": 0}
        # A resume inside an epoch skips on_train_epoch_start: the rate is timed from here then.
        self._since = time.perf_counter()
        self.live: dict[str, torch.Tensor] = {}  # shown by the progress bar (callbacks/progress.py)

    @property
    def policy(self) -> torch.nn.Module:
        """What evaluation acts with (greedy under DETERMINISTIC exploration)."""
        return self.actor

    def uses_value(self, batch: TensorDictBase) -> bool:
        return self.value_coef > 0 and "return" in batch.keys()

    def uses_aux(self) -> bool:
        return self.aux_coef > 0 and bool(self.aux_targets)

    def heads(self, inputs: TensorDictBase, *, value: bool, aux: bool) -> TensorDictBase:
        """``logits`` (and ``state_value``, the aux outputs) on ``inputs``; a shared trunk runs once."""
        trunk = self.trunk
        aux_shares = (
            aux and isinstance(self.aux, TensorDictSequential) and self.aux.module[0] is trunk
        )
        if trunk is None:
            out = self.actor.get_dist_params(inputs.clone(False))
            if value:
                out["state_value"] = self.critic(inputs.clone(False))["state_value"]
            if aux:
                out.update(self.aux(inputs.clone(False)))
            return out
        td = trunk(inputs.clone(False))
        for part in self.actor.module[1:-1]:  # the last one is the distribution, not a layer
            td = part(td)
        if value:
            for part in self.critic.module[1:]:
                td = part(td)
        if aux_shares:
            for part in self.aux.module[1:]:
                td = part(td)
        elif aux:
            td.update(self.aux(inputs.clone(False)))
        return td

    def step_losses(self, batch: TensorDictBase) -> dict[str, torch.Tensor]:
        """The actor's logits (and the critic's value, the aux outputs) on ``batch``, then
        :func:`bc_loss` + ``aux_coef`` * sum of the auxiliary losses."""
        inputs = batch.exclude("action", "return", "episode")
        use_value, use_aux = self.uses_value(batch), self.uses_aux()
        out = self.heads(inputs, value=use_value, aux=use_aux)
        mask = batch.get("action_mask", None)
        weight = batch.get(self.weight_key, None) if self.weight_key else None
        value = out["state_value"] if use_value else None
        target = batch["return"] if use_value else None
        losses = bc_loss(
            out["logits"], batch["action"], mask, value, target, self.value_coef, weight
        )
        if use_aux:
            for name, aux in self.aux_targets.items():
                per_sample = auxiliary_loss(out[aux.output], batch[aux.target], aux.loss)
                losses["loss"] = losses["loss"] + self.aux_coef * weighted_mean(per_sample, weight)
                losses[f"aux_{name}_sum"] = per_sample.detach().sum()
        if self.categories and "category" in batch.keys():
            losses.update(category_sums(losses["correct"], batch["category"], self.categories))
        return losses

    # -- training ------------------------------------------------------------------------------
    def training_step(self, batch: TensorDictBase, batch_idx: int) -> None:
        batch = as_tensordict(batch)
        losses = self.step_losses(batch)
        optimizer = self.optimizers()
        optimizer.zero_grad(set_to_none=True)
        self.manual_backward(losses["loss"])
        grads = [p.grad for p in self.parameters() if p.grad is not None]
        losses["grad_norm_sum"] = (
            torch.nn.utils.get_total_norm(grads).detach() if grads else torch.zeros(())
        )
        losses["steps_sum"] = torch.ones((), device=losses["loss"].device)
        if self.max_grad_norm is not None:
            self.clip_gradients(
                optimizer, gradient_clip_val=self.max_grad_norm, gradient_clip_algorithm="norm"
            )
        optimizer.step()
        scheduler = self.lr_schedulers()
        if scheduler is not None:
            scheduler.step()
        self._add("train", losses, batch.batch_size[0])
        self.live["loss"] = losses["loss"].detach()

    def on_train_epoch_start(self) -> None:
        self._reset("train")

    def on_train_epoch_end(self) -> None:
        self._log_train()

    def _log_train(self) -> None:
        """The training metrics since the last call (an epoch, or up to a mid-epoch validation)."""
        sums, n = self._sums["train"], self._counts["train"]
        if n == 0:
            return
        ce = sums["ce_sum"] / n
        logged = {LOSS_POLICY_CE: ce, TRAIN_ACCURACY: sums["correct_sum"] / n, LOSS_BC: ce}
        logged[TRAIN_TOP3] = sums["top3_sum"] / n
        if "value_sum" in sums:
            logged[LOSS_VALUE] = sums["value_sum"] / n
            logged[LOSS_BC] = ce + self.value_coef * logged[LOSS_VALUE]
        for name in self.aux_targets:
            if f"aux_{name}_sum" in sums:
                logged[f"loss/aux_{name}"] = sums[f"aux_{name}_sum"] / n
                logged[LOSS_BC] = logged[LOSS_BC] + self.aux_coef * logged[f"loss/aux_{name}"]
        logged.update(self._category_accuracies("train", sums))
        logged[TRAIN_GRAD_NORM] = sums["grad_norm_sum"] / sums["steps_sum"]
        logged[TRAIN_LR] = self.optimizers().param_groups[0]["lr"]
        logged[SAMPLES_PER_S] = n / max(time.perf_counter() - self._since, 1e-9)
        logged[TRAIN_SAMPLES] = float(getattr(self.trainer.datamodule, "frames", 0))
        sync = self.trainer.world_size > 1  # several learners: the mean over ranks (equal shards)
        for key, value in logged.items():
            self.log(key, value, on_step=False, on_epoch=True, sync_dist=sync)
        self._reset("train")

    @staticmethod
    def _category_accuracies(stage: str, sums: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {
            f"{stage}/accuracy_{key[len('hit_') : -len('_sum')]}": hits
            / sums["n" + key[len("hit") :]]
            for key, hits in sums.items()
            if key.startswith("hit_") and sums["n" + key[len("hit") :]] > 0
        }

    # -- validation ----------------------------------------------------------------------------
    def on_validation_epoch_start(self) -> None:
        self._reset("val")

    def validation_step(self, batch: TensorDictBase, batch_idx: int) -> None:
        batch = as_tensordict(batch)
        self._add("val", self.step_losses(batch), batch.batch_size[0])

    def on_validation_epoch_end(self) -> None:
        sums, n = self._sums["val"], self._counts["val"]
        if n == 0:
            return
        logged = {
            VAL_POLICY_CE: sums["ce_sum"] / n,
            VAL_ACCURACY: sums["correct_sum"] / n,
            VAL_TOP3: sums["top3_sum"] / n,
        }
        if "value_sum" in sums:
            logged[VAL_VALUE_MSE] = sums["value_sum"] / n
        for name in self.aux_targets:
            if f"aux_{name}_sum" in sums:
                logged[f"val/aux_{name}"] = sums[f"aux_{name}_sum"] / n
        logged.update(self._category_accuracies("val", sums))
        # Several learners validate on disjoint, equal shards (DistributedSampler): the mean over
        # ranks is the whole set's, and every rank's checkpoint decision agrees.
        sync = self.trainer.world_size > 1
        for key, value in logged.items():
            self.log(key, value, on_step=False, on_epoch=True, prog_bar=key == VAL_ACCURACY, sync_dist=sync)
        if self._mid_epoch():  # validation every N steps: the training metrics up to here too
            self._log_train()

    def _mid_epoch(self) -> bool:
        trainer = self.trainer
        return (
            trainer.state.fn == "fit"
            and not trainer.sanity_checking
            and not trainer.fit_loop.epoch_loop.batch_progress.is_last_batch
        )

    def _reset(self, stage: str) -> None:
        self._sums[stage], self._counts[stage] = {}, 0
        if stage == "train":
            self._since = time.perf_counter()

    def _add(self, stage: str, losses: dict[str, torch.Tensor], n: int) -> None:
        sums = self._sums[stage]
        for key, value in losses.items():
            if key.endswith("_sum"):
                sums[key] = sums[key] + value if key in sums else value
        self._counts[stage] += n

    # -- optimiser -----------------------------------------------------------------------------
    def configure_optimizers(self):
        optimizer = self.optimizer_factory(param_groups(self, self.no_decay_norms_biases))
        steps_per_epoch = int(getattr(self.trainer.datamodule, "steps_per_epoch", 0))
        if steps_per_epoch < 1:
            raise RuntimeError(
                "BCModule needs a datamodule with steps_per_epoch (DemonstrationDataModule, or the "
                "one phase.data.datamodule builds)"
            )
        total = max(int(self.trainer.max_epochs or 1), 1) * steps_per_epoch
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimizer, warmup_cosine(total, self.warmup, self.schedule, self.lr_floor)
        )
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}
