"""Scripted controllers for Gymnasium envs: demonstrators for behavioral cloning (docs/bc.md).

A controller is a callable ``td -> action`` over a batch of observations, so
``meeple.phases.bc.record`` can play it through any batch of envs.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import TensorDictBase


class CartPoleExpert:
    """Linear state feedback for CartPole-v1: push right when ``w . (x, x_dot, theta, theta_dot) > 0``.

    The pole angle and angular velocity terms balance the pole; the small cart terms keep the cart
    near the centre so it does not run off the track before the 500-step limit. Measured through
    meeple's recorder (``python -m meeple.phases.bc.record env=cartpole
    +policy._target_=meeple_gym.experts.CartPoleExpert episodes=100 seed=0``): return 500.0 mean
    (min 500, max 500) over 100 episodes; with weights (0, 0, 1, 0) it averages ~41.
    """

    def __init__(self, weights: Sequence[float] = (0.1, 0.5, 1.0, 0.5)) -> None:
        if len(weights) != 4:
            raise ValueError(
                f"weights={list(weights)}; accepted: 4 numbers for (x, x_dot, theta, theta_dot)"
            )
        self.weights = torch.tensor([float(w) for w in weights])

    def __call__(self, td: TensorDictBase) -> torch.Tensor:
        observation = td["observation"].float()
        return (observation @ self.weights.to(observation.device) > 0).long()

    def __repr__(self) -> str:
        return f"CartPoleExpert(weights={self.weights.tolist()})"
