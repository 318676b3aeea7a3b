"""Plain multilayer perceptrons with PPO-style orthogonal initialisation."""

from __future__ import annotations

import math
from collections.abc import Sequence

from torch import nn

ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU, "gelu": nn.GELU, "silu": nn.SiLU}


def orthogonal_linear(in_features: int, out_features: int, gain: float) -> nn.Linear:
    """Orthogonal weights, zero bias: keeps early policy/value outputs well scaled."""
    layer = nn.Linear(in_features, out_features)
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


def mlp_trunk(in_features: int, hidden: Sequence[int], activation: str) -> nn.Sequential:
    """Hidden layers only; output width is ``hidden[-1]`` (or ``in_features`` if empty)."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"model.activation={activation!r}; accepted: {sorted(ACTIVATIONS)}")
    layers: list[nn.Module] = []
    width = in_features
    for h in hidden:
        layers += [orthogonal_linear(width, h, math.sqrt(2)), ACTIVATIONS[activation]()]
        width = h
    return nn.Sequential(*layers)


def mlp(in_features: int, out_features: int, hidden: Sequence[int], activation: str, head_gain: float) -> nn.Sequential:
    """Trunk plus a linear head initialised with ``head_gain`` (0.01 for logits, 1 for values)."""
    trunk = mlp_trunk(in_features, hidden, activation)
    width = hidden[-1] if hidden else in_features
    return nn.Sequential(*trunk, orthogonal_linear(width, out_features, head_gain))
