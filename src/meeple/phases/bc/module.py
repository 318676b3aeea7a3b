"""Behavioral cloning as a LightningModule: masked cross-entropy on the expert's action, plus an
optional value regression on the recorded return-to-go.

``actor`` and ``critic`` come from the same model factory as PPO (``conf/model``), so the state
dict holds ``actor.*`` and ``critic.*`` exactly like :class:`meeple.phases.ppo.module.PPOModule` and
the next phase loads them as they are. Optimisation is manual (as in ``phases/base.py``: one
optimiser step per minibatch, the LR schedule stepped per step), and metrics are summed over
the samples of an epoch and logged once at its end.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import lightning as L
import torch
import torch.nn.functional as F
from tensordict import TensorDictBase

# Metric keys (stable: dashboards, sweeps, early stopping and the pipeline's gates read them).
LOSS_BC = "loss/bc"
LOSS_POLICY_CE = "loss/policy_ce"
LOSS_VALUE = "loss/value"
TRAIN_ACCURACY = "train/accuracy"
TRAIN_LR = "train/lr"
VAL_POLICY_CE = "val/policy_ce"
VAL_ACCURACY = "val/accuracy"
VAL_VALUE_MSE = "val/value_mse"
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


def bc_loss(
    logits: torch.Tensor,
    action: torch.Tensor,
    mask: torch.Tensor | None,
    value: torch.Tensor | None,
    target_return: torch.Tensor | None,
    value_coef: float,
) -> dict[str, torch.Tensor]:
    """L = mean_i CE_i + value_coef * mean_i (V(s_i) - G_i)^2, and its parts as per-sample sums.

    The value term is left out (``value`` None) when value_coef is 0 or the data has no returns.
    Sums (not means) so an epoch's metrics weigh every sample once, whatever the batch sizes.
    """
    ce = masked_cross_entropy(logits, action, mask)
    loss = ce.mean()
    parts = {
        "ce_sum": ce.detach().sum(),
        "correct_sum": (greedy_actions(logits.detach(), mask) == action).float().sum(),
    }
    if value is not None:
        squared = (value.reshape(-1) - target_return.reshape(-1)).pow(2)
        loss = loss + value_coef * squared.mean()
        parts["value_sum"] = squared.detach().sum()
    parts["loss"] = loss
    return parts


def warmup_cosine(total_steps: int, warmup: float, schedule: str) -> Callable[[int], float]:
    """LR factor at optimiser step s: linear warm-up over ``warmup * total_steps`` steps, then
    cosine decay to 0 at ``total_steps`` (``schedule='cosine'``) or constant."""
    warmup_steps = int(warmup * total_steps)

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        if schedule == "constant":
            return 1.0
        progress = min((step - warmup_steps) / max(total_steps - warmup_steps, 1), 1.0)
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    return factor


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
    ) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.actor = actor
        self.critic = critic
        self.optimizer_factory = optimizer
        self.value_coef = value_coef
        self.max_grad_norm = max_grad_norm
        self.warmup = warmup
        self.schedule = schedule
        self._sums: dict[str, dict[str, torch.Tensor]] = {"train": {}, "val": {}}
        self._counts = {"train": 0, "val": 0}
        self.live: dict[str, torch.Tensor] = {}  # shown by the progress bar (callbacks/progress.py)

    @property
    def policy(self) -> torch.nn.Module:
        """What evaluation acts with (greedy under DETERMINISTIC exploration)."""
        return self.actor

    def uses_value(self, batch: TensorDictBase) -> bool:
        return self.value_coef > 0 and "return" in batch.keys()

    def step_losses(self, batch: TensorDictBase) -> dict[str, torch.Tensor]:
        """The actor's logits (and the critic's value) on ``batch``, then :func:`bc_loss`."""
        inputs = batch.exclude("action", "return", "episode")
        logits = self.actor.get_dist_params(inputs.clone(False))["logits"]
        mask = batch.get("action_mask", None)
        value = target = None
        if self.uses_value(batch):
            value = self.critic(inputs.clone(False))["state_value"]
            target = batch["return"]
        return bc_loss(logits, batch["action"], mask, value, target, self.value_coef)

    # -- training ------------------------------------------------------------------------------
    def training_step(self, batch: TensorDictBase, batch_idx: int) -> None:
        losses = self.step_losses(batch)
        optimizer = self.optimizers()
        optimizer.zero_grad(set_to_none=True)
        self.manual_backward(losses["loss"])
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
        self._epoch_start = time.perf_counter()
        self._reset("train")

    def on_train_epoch_end(self) -> None:
        sums, n = self._sums["train"], max(self._counts["train"], 1)
        ce = sums["ce_sum"] / n
        logged = {LOSS_POLICY_CE: ce, TRAIN_ACCURACY: sums["correct_sum"] / n, LOSS_BC: ce}
        if "value_sum" in sums:
            logged[LOSS_VALUE] = sums["value_sum"] / n
            logged[LOSS_BC] = ce + self.value_coef * logged[LOSS_VALUE]
        logged[TRAIN_LR] = self.optimizers().param_groups[0]["lr"]
        logged[SAMPLES_PER_S] = self._counts["train"] / max(
            time.perf_counter() - self._epoch_start, 1e-9
        )
        logged[TRAIN_SAMPLES] = float(getattr(self.trainer.datamodule, "frames", 0))
        for key, value in logged.items():
            self.log(key, value, on_step=False, on_epoch=True)

    # -- validation ----------------------------------------------------------------------------
    def on_validation_epoch_start(self) -> None:
        self._reset("val")

    def validation_step(self, batch: TensorDictBase, batch_idx: int) -> None:
        self._add("val", self.step_losses(batch), batch.batch_size[0])

    def on_validation_epoch_end(self) -> None:
        sums, n = self._sums["val"], self._counts["val"]
        if n == 0:
            return
        logged = {VAL_POLICY_CE: sums["ce_sum"] / n, VAL_ACCURACY: sums["correct_sum"] / n}
        if "value_sum" in sums:
            logged[VAL_VALUE_MSE] = sums["value_sum"] / n
        for key, value in logged.items():
            self.log(key, value, on_step=False, on_epoch=True, prog_bar=key == VAL_ACCURACY)

    def _reset(self, stage: str) -> None:
        self._sums[stage], self._counts[stage] = {}, 0

    def _add(self, stage: str, losses: dict[str, torch.Tensor], n: int) -> None:
        sums = self._sums[stage]
        for key, value in losses.items():
            if key.endswith("_sum"):
                sums[key] = sums[key] + value if key in sums else value
        self._counts[stage] += n

    # -- optimiser -----------------------------------------------------------------------------
    def configure_optimizers(self):
        optimizer = self.optimizer_factory(self.parameters())
        steps_per_epoch = int(getattr(self.trainer.datamodule, "steps_per_epoch", 0))
        if steps_per_epoch < 1:
            raise RuntimeError(
                "BCModule needs a datamodule with steps_per_epoch (DemonstrationDataModule)"
            )
        total = max(int(self.trainer.max_epochs or 1), 1) * steps_per_epoch
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimizer, warmup_cosine(total, self.warmup, self.schedule)
        )
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}
