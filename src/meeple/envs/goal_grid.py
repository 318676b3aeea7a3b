"""GoalGrid: meeple's reference packed-frame env, built by ``make_goal_grid`` (the env config's
factory, ``conf/env/goal_grid.yaml``) with one of two bit-identical renderers: NVIDIA Warp kernels
(`meeple.envs.goal_grid_warp`, when warp is installed) or torch ops (`meeple.envs.goal_grid_torch`,
which also holds the env's rules and constants).
"""

from __future__ import annotations

import torch

from meeple.envs.goal_grid_torch import TorchGoalGrid

RENDERERS = ("warp", "torch", "auto")


def warp_available() -> bool:
    try:
        import warp  # noqa: F401
    except ImportError:
        return False
    return True


def make_goal_grid(
    num_envs: int,
    *,
    device: str | torch.device = "cpu",
    renderer: str = "auto",
    max_steps: int = 40,
):
    """A GoalGrid batch: ``renderer`` warp (NVIDIA Warp kernels), torch, or auto (warp if installed)."""
    if renderer not in RENDERERS:
        raise ValueError(f"renderer={renderer!r}; accepted: {', '.join(RENDERERS)}")
    if renderer == "auto":
        renderer = "warp" if warp_available() else "torch"
    if renderer == "torch":
        return TorchGoalGrid(num_envs, max_steps=max_steps, device=device)
    from meeple.envs.goal_grid_warp import WarpGoalGrid  # warp: an optional dependency

    return WarpGoalGrid(num_envs, max_steps=max_steps, device=device)
