"""Auxiliary losses shared by the phases that train heads beside the policy: BC's
(``phase.aux``, targets from the corpus) and PPO's (``phase.aux``, targets from the rollout,
e.g. labels an env computes from privileged planes that the policy does not read)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch only where a loss is computed: the config schemas import this module
    import torch

AUX_LOSSES = ("ce", "bce")


@dataclass(frozen=True)
class AuxTarget:
    """One auxiliary loss: the model's ``output`` logits against the batch's ``target`` key,
    through ``transform`` first when given, weighted by ``coef`` (PPO's; BC weighs all of its
    auxiliary losses by one ``phase.aux_coef``). ``loss``: see :func:`auxiliary_loss`."""

    output: str
    target: str
    loss: str = "ce"
    coef: float = 1.0
    transform: Callable[[torch.Tensor], torch.Tensor] | None = None


def auxiliary_loss(logits: torch.Tensor, target: torch.Tensor, loss: str) -> torch.Tensor:
    """Per-sample loss of one auxiliary head (float32, also under bf16 autocast).

    ``ce``: cross-entropy over classes (target: class index); ``bce``: binary cross-entropy per
    output, averaged over the outputs (target: 0/1 of the same shape as the logits)."""
    import torch.nn.functional as F

    logits = logits.float()
    if loss == "ce":
        return F.cross_entropy(logits, target.long().reshape(-1), reduction="none")
    if loss == "bce":
        per_output = F.binary_cross_entropy_with_logits(
            logits, target.float().reshape(logits.shape), reduction="none"
        )
        return per_output.reshape(len(logits), -1).mean(-1)
    raise ValueError(f"auxiliary loss {loss!r}; accepted: {', '.join(AUX_LOSSES)}")
