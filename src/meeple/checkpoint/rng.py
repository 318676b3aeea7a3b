"""Every random generator a rollout depends on, as plain tensors and Python values.

Stored under ``rng_state`` in each checkpoint and restored before the first step of a
resumed run: torch's CPU generator, every CUDA device's generator, numpy's global bit
generator, Python's ``random``, and the spawn counters of the run's seed streams
(``SeedSequence.n_children_spawned``, e.g. how many evaluation seeds were drawn).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

log = logging.getLogger(__name__)


def capture_rng_state(seed_streams: Mapping[str, int] | None = None) -> dict[str, Any]:
    numpy_state = np.random.get_state(legacy=False)
    return {
        "torch_cpu": torch.get_rng_state(),
        "torch_cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "numpy": {
            "bit_generator": numpy_state["bit_generator"],
            "key": torch.from_numpy(numpy_state["state"]["key"].astype(np.int64)),
            "pos": int(numpy_state["state"]["pos"]),
            "has_gauss": int(numpy_state["has_gauss"]),
            "gauss": float(numpy_state["gauss"]),
        },
        "python": random.getstate(),
        "seed_streams": dict(seed_streams or {}),
    }


def restore_rng_state(state: Mapping[str, Any]) -> None:
    """Restore the generators of :func:`capture_rng_state` (seed streams are the caller's)."""
    torch.set_rng_state(state["torch_cpu"])
    cuda = list(state["torch_cuda"])
    if cuda and torch.cuda.is_available():
        if len(cuda) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(cuda)
        else:
            log.warning("checkpoint holds %d CUDA generator states, this machine has %d devices: CUDA "
                        "generators are not restored", len(cuda), torch.cuda.device_count())
    elif cuda:
        log.warning("checkpoint holds CUDA generator states but CUDA is not available: not restored")
    numpy_state = state["numpy"]
    np.random.set_state({
        "bit_generator": numpy_state["bit_generator"],
        "state": {"key": numpy_state["key"].numpy().astype(np.uint32), "pos": numpy_state["pos"]},
        "has_gauss": numpy_state["has_gauss"],
        "gauss": numpy_state["gauss"],
    })
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
