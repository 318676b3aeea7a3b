"""Rebuild a trained policy from a checkpoint: ``cfg.model`` from the saved config + its weights.

A PPO checkpoint (docs/checkpoints.md) holds the LightningModule's ``model_state_dict`` (the
actor's parameters under ``actor.``) and the resolved ``config``. The actor is rebuilt the way
training built it, ``instantiate(cfg.model)(observation_spec, action_spec)``, with the specs
of the env it will play, and loaded strictly, so a model that does not match the env fails
here with the mismatching keys rather than later with wrong actions.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from meeple.checkpoint.io import CheckpointError, load_verified

ACTOR_PREFIX = "actor."
LATEST = Path("phase0") / "checkpoints" / "latest.pt"
_PHASE_DIR = re.compile(r"^phase(\d+)$")


def checkpoint_file(path: str | os.PathLike) -> Path:
    """``path`` itself when it is a file (a gate file ``gates/<stage>.pt`` too); a run directory's
    newest stage's ``phase{k}/checkpoints/latest.pt`` (a single-stage run: ``phase0``)."""
    p = Path(path)
    if p.is_dir():
        stages = sorted(
            (int(m.group(1)), d / "checkpoints" / "latest.pt")
            for d in p.iterdir()
            if (m := _PHASE_DIR.match(d.name)) and (d / "checkpoints" / "latest.pt").exists()
        )
        if stages:
            return stages[-1][1]
        if (p / "latest.pt").exists():
            return p / "latest.pt"
        raise CheckpointError(
            f"{p}: a directory without {LATEST} or latest.pt; give a checkpoint file (.pt) "
            "or a run directory (outputs/runs/<run id>)"
        )
    if not p.exists():
        raise CheckpointError(
            f"{p}: no such file; give a checkpoint file (.pt) or a run directory (outputs/runs/<run id>)"
        )
    return p


def actor_state(model_state_dict: dict[str, torch.Tensor], where: str) -> dict[str, torch.Tensor]:
    """The actor's parameters, without the module prefix and torch.compile's ``_orig_mod``."""
    state = {
        k[len(ACTOR_PREFIX) :].replace("._orig_mod", ""): v
        for k, v in model_state_dict.items()
        if k.startswith(ACTOR_PREFIX)
    }
    if not state:
        prefixes = sorted({k.split(".", 1)[0] for k in model_state_dict})
        raise CheckpointError(
            f"{where}: no actor weights ({ACTOR_PREFIX}*) in model_state_dict (it holds {prefixes}); "
            "a PPO checkpoint is needed"
        )
    return state


def load_actor(
    path: str | os.PathLike,
    make_specs: Callable[[dict[str, Any]], tuple[Any, Any]],
    *,
    map_location: str | torch.device = "cpu",
) -> tuple[torch.nn.Module, dict[str, Any]]:
    """The checkpoint's actor (eval mode) and ``{file, global_step, timestamp, config}``.

    ``make_specs(config)`` returns ``(observation_spec, action_spec)`` of the env the actor
    will play; it may check ``config`` (e.g. the env) and raise a clear error.
    """
    file = checkpoint_file(path)
    ckpt = load_verified(file, map_location=map_location)
    actor, info = actor_from_checkpoint(ckpt, file, make_specs)
    return actor.to(map_location).eval(), info


def actor_from_checkpoint(
    ckpt: dict[str, Any], file: Path, make_specs: Callable[[dict[str, Any]], tuple[Any, Any]]
) -> tuple[torch.nn.Module, dict[str, Any]]:
    """The actor of an already loaded checkpoint ``ckpt`` (read from ``file``), loaded strictly."""
    config = ckpt.get("config")
    if not isinstance(config, dict) or "model" not in config:
        raise CheckpointError(
            f"{file}: no saved config with a model section; not a training checkpoint"
        )
    state = actor_state(ckpt.get("model_state_dict") or {}, str(file))
    observation_spec, action_spec = make_specs(config)
    target = config["model"].get("_target_") if isinstance(config["model"], dict) else None
    try:
        actor, _critic = instantiate(OmegaConf.create(config["model"]))(
            observation_spec, action_spec
        )
    except Exception as err:  # a model this meeple cannot build: an import, a changed signature
        raise CheckpointError(
            f"{file}: cannot rebuild model {target!r} from the saved config ({type(err).__name__}: {err})"
        ) from err
    try:
        actor.load_state_dict(state, strict=True)
    except RuntimeError as err:
        raise CheckpointError(
            f"{file}: the weights do not fit model {target!r} built for this env "
            f"({' '.join(str(err).split())[:500]})"
        ) from err
    info = {"file": str(file.resolve()), "global_step": ckpt.get("global_step"),
            "timestamp": ckpt.get("timestamp"), "config": config}  # fmt: skip
    return actor, info
