"""Auxiliary losses shared by the phases that train heads beside the policy: BC's
(``phase.aux``, targets from the corpus) and PPO's (``phase.aux``, targets from the rollout,
e.g. labels an env computes from privileged planes that the policy does not read)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

AUX_LOSSES = ("ce", "bce")


def auxiliary_loss(logits: torch.Tensor, target: torch.Tensor, loss: str) -> torch.Tensor:
    """Per-sample loss of one auxiliary head (float32, also under bf16 autocast).

    ``ce``: cross-entropy over classes (target: class index); ``bce``: binary cross-entropy per
    output, averaged over the outputs (target: 0/1 of the same shape as the logits)."""
    logits = logits.float()
    if loss == "ce":
        return F.cross_entropy(logits, target.long().reshape(-1), reduction="none")
    if loss == "bce":
        per_output = F.binary_cross_entropy_with_logits(
            logits, target.float().reshape(logits.shape), reduction="none"
        )
        return per_output.reshape(len(logits), -1).mean(-1)
    raise ValueError(f"auxiliary loss {loss!r}; accepted: {', '.join(AUX_LOSSES)}")
