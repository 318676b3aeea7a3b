"""Checkpoints to play against without training, saved as the phases save theirs (weights and the
config), with fresh tiny weights: the play adapters load them the way they load a trained run's."""

from __future__ import annotations

from pathlib import Path

from hydra.utils import instantiate
from omegaconf import OmegaConf

from meeple.checkpoint.io import save_atomic
from meeple.plugins.registry import load_game

TINY_RESNET = {"_target_": "meeple.nets.az_resnet.build_az_resnet", "_partial_": True, "channels": 8, "blocks": 1}


def alphazero_checkpoint(game: str, path: Path, seed: int = 0) -> Path:
    """An AlphaZero checkpoint of ``game`` (``best.*``: the network that plays)."""
    import torch

    torch.manual_seed(seed)
    spec = load_game(game)
    net = instantiate(OmegaConf.create(TINY_RESNET))(spec.planes_shape, spec.num_actions)
    config = {"model": TINY_RESNET, "phase": {"name": "alphazero", "game": game}}
    weights = {f"best.{k}": v for k, v in net.state_dict().items()}
    save_atomic({"model_state_dict": weights, "config": config, "checkpoint_version": 1, "global_step": 0}, path)
    return path


MAHJONG_MODEL = {"_target_": "meeple.nets.planes.build_planes_actor_critic", "_partial_": True,
                 "channels": 8, "blocks": 1, "hidden": 16, "shared": True}  # fmt: skip


def mahjong_checkpoint(path: Path, seed: int = 0) -> Path:
    """An ``env=mahjong`` PPO checkpoint (actor and critic), fresh tiny weights."""
    import torch

    from meeple_mahjong.specs import action_spec, observation_spec

    torch.manual_seed(seed)
    actor, critic = instantiate(OmegaConf.create(MAHJONG_MODEL))(observation_spec(1, oracle=False), action_spec(1))
    weights = {f"actor.{k}": v for k, v in actor.state_dict().items()}
    weights.update({f"critic.{k}": v for k, v in critic.state_dict().items()})
    config = {"model": MAHJONG_MODEL, "env": {"backend": "mahjong", "learner_seats": [0]}}
    save_atomic({"model_state_dict": weights, "config": config, "checkpoint_version": 1, "global_step": 0}, path)
    return path
