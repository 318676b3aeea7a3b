"""A torch network as the evaluator callable of native MCTS / self-play.

Native search hands the evaluator a batch of planes ``(B, C, H, W)`` float32 and legal
masks ``(B, A)`` and wants ``(policy logits (B, A), value (B,))`` back as arrays. On
CUDA the planes live in two pinned host buffers that the native workers encode into
(``planes_buffers``), so the host-to-device copy is asynchronous and nothing is copied
on the host.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


class TorchEvaluator:
    """Calls ``net`` in inference mode on ``device``; ``net`` may be swapped between runs."""

    def __init__(self, net: nn.Module, device: torch.device | str = "cpu") -> None:
        self.net = net
        self.device = torch.device(device)
        self.calls = 0

    def planes_buffers(self, batch_size: int, planes_shape: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
        """Two host buffers for the native workers to encode into (pinned when the net is on CUDA)."""
        pin = self.device.type == "cuda"
        return tuple(torch.empty((batch_size, *planes_shape), dtype=torch.float32, pin_memory=pin) for _ in range(2))

    @torch.inference_mode()
    def __call__(self, planes, legal) -> tuple[np.ndarray, np.ndarray]:
        if isinstance(planes, np.ndarray):
            # Native MCTS passes read-only views of its buffer; torch wants a writable array.
            x = torch.from_numpy(planes if planes.flags.writeable else planes.copy())
        else:
            x = planes
        x = x.to(self.device, non_blocking=True)
        was_training = self.net.training
        if was_training:
            self.net.eval()  # BatchNorm with running statistics at inference
        try:
            logits, value = self.net(x)
        finally:
            if was_training:
                self.net.train()
        self.calls += 1
        return logits.float().cpu().numpy(), value.float().cpu().numpy()
