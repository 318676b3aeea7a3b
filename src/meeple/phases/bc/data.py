"""Demonstrations -> Lightning: shuffled training minibatches, validation batches, and the env
that greedy evaluation plays.

One Lightning epoch is one pass over the training episodes' records in an order drawn from
``generator`` (seeded from the phase's DATA component). Minibatches are TensorDicts indexed out
of the memory-mapped records; the last one of an epoch may be smaller. The generator's state,
the samples seen and the seed streams' positions go into every checkpoint, so a resumed run
draws the same orders as an uninterrupted one.

For :class:`meeple.callbacks.evaluation.GreedyEvaluation` the datamodule offers what
``RolloutDataModule`` does: ``env_fn(num_envs=, seed=)``, ``seed_stream(component)``,
``batch_unit`` and ``frames`` (here: training samples seen).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

import lightning as L
import torch
from tensordict import TensorDictBase
from torch.utils.data import DataLoader, IterableDataset
from torchrl.envs import EnvBase

from meeple.phases.bc.dataset import Demonstrations
from meeple.seeding import Component, PhaseSeeds, SeedStream, SeedStreams

# val_fraction=0: no validation loader, on purpose.
warnings.filterwarnings("ignore", message="Total length of `list` across ranks is zero")


def _identity(x: Any) -> Any:
    return x


class DemonstrationDataModule(SeedStreams, L.LightningDataModule):
    def __init__(
        self,
        demonstrations: Demonstrations,
        *,
        seeds: PhaseSeeds,
        batch_size: int,
        val_fraction: float,
        split_seed: int,
        env_fn: Callable[..., EnvBase] | None = None,
        batch_unit: int = 1,
    ) -> None:
        super().__init__()
        self.demonstrations = demonstrations
        self.records = demonstrations.records
        self.seeds = seeds
        self.batch_size = batch_size
        self.train_index, self.val_index = demonstrations.split(val_fraction, split_seed)
        self.env_fn = env_fn
        self.batch_unit = batch_unit
        self.generator = torch.Generator().manual_seed(seeds.seed(Component.DATA))
        self.frames = 0  # training samples yielded so far (x axis of evaluation curves)
        self._streams: dict[Component, SeedStream] = {}

    @property
    def steps_per_epoch(self) -> int:
        return -(-len(self.train_index) // self.batch_size)

    def batch(self, index: torch.Tensor) -> TensorDictBase:
        """The records at ``index`` as an in-memory TensorDict."""
        return self.records[index]

    # -- loaders -------------------------------------------------------------------------------
    def train_dataloader(self) -> DataLoader:
        return DataLoader(ShuffledBatches(self), batch_size=None, collate_fn=_identity)

    def val_dataloader(self) -> DataLoader | list:
        if len(self.val_index) == 0:
            return []
        return DataLoader(FixedBatches(self, self.val_index), batch_size=None, collate_fn=_identity)

    # -- checkpoint state ----------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "generator": self.generator.get_state(),
            "frames": self.frames,
            "train_records": len(self.train_index),
            "val_records": len(self.val_index),
        }

    def load_state_dict(self, state: dict) -> None:
        saved = (state["train_records"], state["val_records"])
        if saved != (len(self.train_index), len(self.val_index)):
            from meeple.checkpoint.io import CheckpointError

            raise CheckpointError(
                f"the checkpoint was trained on {saved[0]} training and {saved[1]} validation records; "
                f"this dataset split has {len(self.train_index)} and {len(self.val_index)}; accepted: the "
                "same dataset, val_fraction and split_seed"
            )
        self.generator.set_state(state["generator"])
        self.frames = state["frames"]


class ShuffledBatches(IterableDataset):
    """One epoch: the training records in a fresh order from the datamodule's generator."""

    def __init__(self, dm: DemonstrationDataModule) -> None:
        self.dm = dm

    def __len__(self) -> int:
        return self.dm.steps_per_epoch

    def __iter__(self) -> Iterator[TensorDictBase]:
        dm = self.dm
        order = dm.train_index[torch.randperm(len(dm.train_index), generator=dm.generator)]
        for start in range(0, len(order), dm.batch_size):
            index = order[start : start + dm.batch_size]
            dm.frames += len(index)
            yield dm.batch(index)


class FixedBatches(IterableDataset):
    """``index`` in order, ``batch_size`` records at a time (validation)."""

    def __init__(self, dm: DemonstrationDataModule, index: torch.Tensor) -> None:
        self.dm = dm
        self.index = index

    def __len__(self) -> int:
        return -(-len(self.index) // self.dm.batch_size)

    def __iter__(self) -> Iterator[TensorDictBase]:
        for start in range(0, len(self.index), self.dm.batch_size):
            yield self.dm.batch(self.index[start : start + self.dm.batch_size])


class ExternalDataModule(SeedStreams, L.LightningDataModule):
    """The data module ``phase.data.datamodule`` builds (a plugin's corpus loader, say), with what
    the phase adds around it: the env greedy evaluation plays (``env_fn``, ``batch_unit``) and the
    seed streams checkpoints save.

    What the inner module must provide: ``train_dataloader()`` (TensorDicts or dicts of tensors
    with ``action``, the model's inputs and any target ``phase.aux`` names), ``steps_per_epoch``
    (the LR schedule's length), and optionally ``val_dataloader()``, ``frames`` (training samples
    seen), ``state_dict()`` / ``load_state_dict()`` (an exact resume), ``setup``/``teardown`` and
    the batch hooks ``on_before_batch_transfer`` / ``on_after_batch_transfer`` (which see the
    trainer as ``self.trainer``, as they would unwrapped: e.g. to count the loader's position
    when a training step takes a batch).
    """

    def __init__(
        self,
        inner: L.LightningDataModule,
        *,
        seeds: PhaseSeeds,
        env_fn: Callable[..., EnvBase] | None = None,
        batch_unit: int = 1,
    ) -> None:
        super().__init__()
        missing = [
            # on the class: hasattr on the instance would evaluate a property (and a corpus module
            # builds its corpus on first use, which belongs to the fit)
            name for name in ("train_dataloader", "steps_per_epoch") if not hasattr(type(inner), name)
        ]
        if missing:
            raise TypeError(
                f"phase.data.datamodule built a {type(inner).__name__} without {', '.join(missing)}; accepted: "
                "a LightningDataModule with train_dataloader() and steps_per_epoch"
            )
        self.inner = inner
        self.seeds = seeds
        self.env_fn = env_fn
        self.batch_unit = batch_unit
        self._streams: dict[Component, SeedStream] = {}

    @property
    def steps_per_epoch(self) -> int:
        return int(self.inner.steps_per_epoch)

    @property
    def frames(self) -> int:
        return int(getattr(self.inner, "frames", 0))

    def prepare_data(self) -> None:
        if hasattr(self.inner, "prepare_data"):
            self.inner.prepare_data()

    def setup(self, stage: str) -> None:
        self.inner.trainer = self.trainer
        if hasattr(self.inner, "setup"):
            self.inner.setup(stage)

    def on_before_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        return self.inner.on_before_batch_transfer(batch, dataloader_idx)

    def on_after_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        return self.inner.on_after_batch_transfer(batch, dataloader_idx)

    def teardown(self, stage: str) -> None:
        if hasattr(self.inner, "teardown"):
            self.inner.teardown(stage)

    def train_dataloader(self):
        return self.inner.train_dataloader()

    def val_dataloader(self):
        return self.inner.val_dataloader() if _provides(self.inner, "val_dataloader") else []

    def state_dict(self) -> dict:
        return self.inner.state_dict() if hasattr(self.inner, "state_dict") else {}

    def load_state_dict(self, state: dict) -> None:
        if hasattr(self.inner, "load_state_dict"):
            self.inner.load_state_dict(state)


def _provides(inner: object, hook: str) -> bool:
    """Whether ``inner`` implements ``hook`` (LightningDataModule's own raises when called)."""
    if isinstance(inner, L.LightningDataModule):
        from lightning.pytorch.utilities.model_helpers import is_overridden

        return is_overridden(hook, inner, L.LightningDataModule)
    return hasattr(inner, hook)
