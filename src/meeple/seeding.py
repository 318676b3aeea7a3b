"""Seed hierarchy: master seed -> phase -> component [-> rank], via numpy SeedSequence.

Every random stream is drawn from ``SeedSequence(master, spawn_key=(phase, component))``
with a fixed component index, so adding a component never shifts another's
stream, and nearby master seeds give unrelated streams (never ``seed + i``). In a
multi-process (DDP) run, rank r > 0 draws from ``(phase, component, RANK_KEY + r)`` for the
components each rank owns (its envs, its sampling); rank 0 keeps the single-process seeds, and
every rank shares the model's initialisation.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import torch


class Component(IntEnum):
    """Fixed spawn index of each consumer of randomness (never renumber)."""

    MODEL_INIT = 0
    DATA = 1  # minibatch shuffling, action sampling
    AUGMENTATION = 2
    ENV = 3
    OPPONENT = 4
    EVALUATION = 5
    FEATURE_DROPOUT = 6  # distillation: which privileged planes the teacher sees


# Components every rank of a multi-process run shares: the weights start equal everywhere
# (DDP broadcasts rank 0's anyway; a frozen copy taken before that must agree too), and the
# evaluation runs once, on rank 0.
SHARED_ACROSS_RANKS = frozenset({Component.MODEL_INIT, Component.EVALUATION})
RANK_KEY = 2**29  # below restart_seeds' 2**30 and stream's 2**31 keys; far above worker indices


def resolve_master_seed(seed: int | None) -> int:
    """The configured master seed, or a fresh one from ``os.urandom`` (log it)."""
    if seed is None:
        return int.from_bytes(os.urandom(4), "little")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise ValueError(f"seed must be null or an integer in [0, 2**63), got {seed!r}")
    return seed


def phase_sequence(master: int, phase: int) -> np.random.SeedSequence:
    return np.random.SeedSequence(master, spawn_key=(phase,))


def _to_int(seq: np.random.SeedSequence) -> int:
    """A 32-bit seed for libraries that take an int (torch, gymnasium)."""
    return int(seq.generate_state(1)[0])


@dataclass(frozen=True)
class PhaseSeeds:
    """The seeds of one phase of a run; every component draws from its own branch."""

    master: int
    phase: int
    rank: int = 0  # this process's global rank in a multi-process (DDP) run

    def _key(self, component: Component) -> tuple[int, ...]:
        if self.rank == 0 or component in SHARED_ACROSS_RANKS:
            return (self.phase, int(component))
        return (self.phase, int(component), RANK_KEY + self.rank)

    def sequence(self, component: Component) -> np.random.SeedSequence:
        """Rank 0: equals ``phase_sequence(master, phase).spawn(n)[component]`` for any n > component."""
        return np.random.SeedSequence(self.master, spawn_key=self._key(component))

    def seed(self, component: Component) -> int:
        return _to_int(self.sequence(component))

    def worker_seeds(self, component: Component, n: int) -> list[int]:
        """One independent seed per worker of a component (children 0..n-1)."""
        return [_to_int(child) for child in self.sequence(component).spawn(n)]

    def stream(self, component: Component, offset: int = 0, position: int = 0) -> SeedStream:
        """An endless stream of fresh seeds (e.g. one per evaluation), independent of worker_seeds.

        ``position`` seeds are skipped (a checkpoint stores ``SeedStream.position``).
        """
        return SeedStream(
            np.random.SeedSequence(
                self.master, spawn_key=(*self._key(component), 2**31 + offset), n_children_spawned=position
            )
        )

    def restart_seeds(self, component: Component, n: int, restart: int) -> list[int]:
        """Seeds for ``n`` workers restarted at rollout ``restart`` (a resume that cannot restore
        the envs' state): fresh episodes, reproducible, independent of worker_seeds and streams."""
        seq = np.random.SeedSequence(self.master, spawn_key=(*self._key(component), 2**30 + restart))
        return [_to_int(child) for child in seq.spawn(n)]


class SeedStream(Iterator[int]):
    """Endless fresh seeds from one SeedSequence; ``position`` is its spawn counter."""

    def __init__(self, sequence: np.random.SeedSequence) -> None:
        self.sequence = sequence

    @property
    def position(self) -> int:
        return self.sequence.n_children_spawned

    def __next__(self) -> int:
        return _to_int(self.sequence.spawn(1)[0])


class SeedStreams:
    """Mixin for a datamodule: one stream of fresh seeds per component (e.g. evaluation seeds),
    created on first use from ``self.seeds``; checkpoints store and restore their positions
    (``RolloutCheckpoint`` calls :meth:`seed_stream_positions` / :meth:`restore_seed_streams`)."""

    seeds: PhaseSeeds
    _streams: dict[Component, SeedStream]

    def seed_stream(self, component: Component) -> SeedStream:
        """This run's stream of fresh seeds for ``component`` (one per component; checkpointed)."""
        streams = self.__dict__.setdefault("_streams", {})
        if component not in streams:
            streams[component] = self.seeds.stream(component)
        return streams[component]

    def seed_stream_positions(self) -> dict[str, int]:
        streams = self.__dict__.get("_streams", {})
        return {component.name: stream.position for component, stream in streams.items()}

    def restore_seed_streams(self, positions: dict[str, int]) -> None:
        self._streams = {Component[name]: self.seeds.stream(Component[name], position=position)
                         for name, position in positions.items()}


def reseed_rank(seeds: PhaseSeeds, generator: torch.Generator, restart: int) -> None:
    """A rank > 0 resuming from rank 0's checkpoint (rank 0's generators): fresh streams of this
    rank's own for the process RNG (sampling) and ``generator`` (the shuffle), reproducible per
    ``restart`` (the datamodule's progress: rollouts or iterations done)."""
    process, shuffle = seeds.restart_seeds(Component.DATA, 2, restart)
    seed_process(process)
    generator.manual_seed(shuffle)


def seed_process(seed: int) -> None:
    """Seed the global generators of torch, numpy and ``random`` in this process."""
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)
