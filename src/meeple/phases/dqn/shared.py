"""State shared between the main, actor and learner processes of the independent topology.

- :class:`SharedModel`: one agent's model in shared memory, published by exactly one writer
  (its learner) and read by any number of readers (the actor) without a model lock.
- :func:`make_shared_buffer`: one agent's TorchRL replay buffer with shared-memory TensorDict
  storage; TorchRL's ``shared=True`` gives it one inter-process lock (the buffer's only lock)
  and process-shared length and cursor.

Publishing protocol (double buffer + per-slot sequence counters, a "seqlock"):

- two full copies of the model (slots) live in shared memory; version ``v`` lives in slot
  ``v % 2``, so the newest complete snapshot is never the one being written;
- the writer publishing version ``v + 1`` makes slot ``(v + 1) % 2``'s counter odd, loads the
  whole state dict into it (online and target networks), makes the counter even again, and
  only then sets the version to ``v + 1``;
- a reader takes the version, copies that slot, and keeps the copy only if the slot's counter
  was even and unchanged across the copy (else the writer lapped it: it retries).

The writer never waits for a reader and a reader never waits for the writer's copy. The
counters sit in one ``multiprocessing.Array`` whose lock is held only around single counter
reads and writes (a few hundred nanoseconds, never around a copy): it serves as the memory
fence that orders the counters against the tensor copies on every CPU architecture.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Callable

import torch
from tensordict import TensorDict, TensorDictBase
from torch import nn
from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer

VERSION, SEQ0 = 0, 1  # layout of SharedModel.counters: [version, seq(slot 0), seq(slot 1)]


class TornReadError(RuntimeError):
    """A reader could not get a consistent snapshot within its retry budget."""


class SharedModel:
    """One agent's model in shared memory: single writer, lock-free consistent snapshots.

    ``make_model`` builds an (identical) module on CPU; it is called twice here. Pass the
    object to spawned processes as an argument: the slots' tensors travel as shared memory.
    """

    def __init__(
        self, make_model: Callable[[], nn.Module], *, ctx: mp.context.BaseContext | None = None
    ) -> None:
        ctx = ctx or mp.get_context("spawn")
        first = make_model()
        self.slots = [first, make_model()]
        self.slots[1].load_state_dict(first.state_dict())
        for slot in self.slots:
            slot.share_memory()
        self.counters = ctx.Array("q", 3)  # version, seq slot 0, seq slot 1 (all start at 0)
        # Tests set this to slow every tensor copy of a publish down (to widen race windows).
        self.publish_delay_s = 0.0

    # -- counters (each access is a fenced single read or write) --
    def _get(self, i: int) -> int:
        with self.counters.get_lock():
            return int(self.counters[i])

    def _set(self, i: int, value: int) -> None:
        with self.counters.get_lock():
            self.counters[i] = value

    @property
    def version(self) -> int:
        """Number of publishes so far (0: the initial weights)."""
        return self._get(VERSION)

    def latest(self) -> nn.Module:
        """The slot holding the newest snapshot (read it only through :meth:`read_into`)."""
        return self.slots[self.version % 2]

    # -- writer (the agent's learner, only) --
    def publish(self, model: nn.Module) -> int:
        """Copy ``model``'s whole state (any device) into the spare slot and make it current."""
        version = self._get(VERSION) + 1
        slot, seq = version % 2, SEQ0 + version % 2
        start = self._get(seq)
        self._set(seq, start + 1)  # odd: being written
        state = model.state_dict()
        if self.publish_delay_s:
            self._load_slowly(self.slots[slot], state)
        else:
            with torch.no_grad():
                self.slots[slot].load_state_dict(state)
        self._set(seq, start + 2)  # even: complete
        self._set(VERSION, version)
        return version

    def _load_slowly(self, target: nn.Module, state: dict[str, torch.Tensor]) -> None:
        params = target.state_dict()
        with torch.no_grad():
            for name, value in state.items():
                params[name].copy_(value)
                time.sleep(self.publish_delay_s)

    # -- readers --
    def read_into(self, local: nn.Module, *, max_tries: int = 1000) -> int:
        """Load the newest complete snapshot into ``local``; return its version."""
        for _ in range(max_tries):
            version = self._get(VERSION)
            seq = SEQ0 + version % 2
            before = self._get(seq)
            if before % 2:  # the writer lapped us and is rewriting this slot: take the next version
                time.sleep(0)
                continue
            with torch.no_grad():
                local.load_state_dict(self.slots[version % 2].state_dict())
            if self._get(seq) == before:
                return version
        raise TornReadError(
            f"no consistent snapshot after {max_tries} tries (publishes outpace the reader)"
        )


def transition_template(obs_dim: int) -> TensorDict:
    """One transition as stored in an agent's buffer (the keys ``DQNLoss`` reads)."""
    return TensorDict(
        observation=torch.zeros(obs_dim),
        action=torch.zeros((), dtype=torch.int64),
        next=TensorDict(
            observation=torch.zeros(obs_dim),
            reward=torch.zeros(1),
            done=torch.zeros(1, dtype=torch.bool),
            terminated=torch.zeros(1, dtype=torch.bool),
        ),
    )


def make_shared_buffer(
    template: TensorDictBase, capacity: int, batch_size: int
) -> TensorDictReplayBuffer:
    """A replay buffer whose storage is allocated now, in shared memory, from ``template``."""
    storage = LazyTensorStorage(capacity)
    storage._init(template)  # allocate before spawning: children must see the same memory
    storage._storage.share_memory_()
    return TensorDictReplayBuffer(storage=storage, batch_size=batch_size, shared=True)


def buffer_tensors(buffer: TensorDictReplayBuffer) -> list[torch.Tensor]:
    """The storage tensors of a buffer (for isolation checks)."""
    return list(buffer._storage._storage.values(include_nested=True, leaves_only=True))
