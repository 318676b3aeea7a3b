"""Checkpoints to play against without training: an AlphaZero checkpoint as the phase saves one
(``best.*`` weights and the config), fresh tiny weights. The play adapters load them the way they
load a trained run's."""

from __future__ import annotations

from pathlib import Path

from hydra.utils import instantiate
from omegaconf import OmegaConf

from meeple.checkpoint.io import save_atomic
from meeple.plugins.registry import load_game

TINY_RESNET = {"_target_": "meeple.nets.az_resnet.build_az_resnet", "_partial_": True, "channels": 8, "blocks": 1}


def alphazero_checkpoint(game: str, path: Path, seed: int = 0) -> Path:
    import torch

    torch.manual_seed(seed)
    spec = load_game(game)
    net = instantiate(OmegaConf.create(TINY_RESNET))(spec.planes_shape, spec.num_actions)
    config = {"model": TINY_RESNET, "phase": {"name": "alphazero", "game": game}}
    weights = {f"best.{k}": v for k, v in net.state_dict().items()}
    save_atomic({"model_state_dict": weights, "config": config, "checkpoint_version": 1, "global_step": 0}, path)
    return path
