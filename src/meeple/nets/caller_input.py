"""Inputs a network computes from its observation with code a traced graph cannot hold.

A module that derives a tensor from the observation with native code (a C++ call, no torch ops)
cannot be traced into ONNX as it is. It lists those tensors in ``onnx_caller_inputs`` and takes
each as an optional keyword argument of ``forward`` (computed by itself when absent). The ONNX
export (``meeple.export``) then makes each one an input of the exported graph beside the
observation: the caller computes it with ``compute`` (the sidecar names the function in ``how``),
and the graph holds everything after it.

This module is the protocol only; it imports nothing of the exporter, so a network can use it
and training still never imports ``meeple.export``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class CallerInput:
    """One tensor the caller of an exported graph computes from the observation."""

    name: str  # the graph input's name and the keyword of the module's forward
    shape: tuple[int, ...]  # per observation (the batch dimension comes first)
    compute: Callable[[torch.Tensor], torch.Tensor]  # (batch, *obs) -> (batch, *shape), float32
    how: str  # what a caller without meeple runs, for the sidecar


def caller_inputs(module: torch.nn.Module) -> tuple[CallerInput, ...]:
    """The caller inputs ``module`` declares (none for most modules)."""
    return tuple(getattr(module, "onnx_caller_inputs", ()))
