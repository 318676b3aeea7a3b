"""Test helpers named by ``_target_``: a synthetic data module for BC's ``phase.data.datamodule``
path (CartPole-shaped batches), a mid-epoch crash, and marked / unmarked model factories.

The expert pushes the cart towards the pole's lean: action = 1 if the pole angle
(observation[2]) is positive, else 0, so a policy can learn it within a few dozen steps.
"""

from __future__ import annotations

import lightning as L
import torch
from torch.utils.data import DataLoader

from meeple.nets.actor_critic import build_actor_critic
from meeple.nets.kinds import mark_actor_critic_factory


class LeanExpertBatches(L.LightningDataModule):
    def __init__(self, *, batch_size: int, seed: int, train: int = 1024, val: int = 256) -> None:
        super().__init__()
        self.batch_size = batch_size
        self.seed = seed
        generator = torch.Generator().manual_seed(seed)
        self.train_data = self._samples(train, generator)
        self.val_data = self._samples(val, torch.Generator().manual_seed(12345))
        self.frames = 0
        self.val_batches = 0  # validation batches served (tests count validations with it)

    @staticmethod
    def _samples(n: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
        observation = torch.randn(n, 4, generator=generator)
        return {
            "observation": observation,
            "action": (observation[:, 2] > 0).long(),
            "return": observation[:, 2].abs(),
            "weight": torch.ones(n),
        }

    @property
    def steps_per_epoch(self) -> int:
        return -(-len(self.train_data["action"]) // self.batch_size)

    def _batches(self, data: dict[str, torch.Tensor]) -> list[dict[str, torch.Tensor]]:
        n = len(data["action"])
        return [
            {k: v[i : i + self.batch_size] for k, v in data.items()}
            for i in range(0, n, self.batch_size)
        ]

    def train_dataloader(self) -> DataLoader:
        module = self

        class Epoch(torch.utils.data.IterableDataset):
            def __len__(self) -> int:
                return module.steps_per_epoch

            def __iter__(self):
                for batch in module._batches(module.train_data):
                    module.frames += len(batch["action"])
                    yield batch

        return DataLoader(Epoch(), batch_size=None)

    def val_dataloader(self) -> DataLoader:
        module = self

        class Fixed(torch.utils.data.IterableDataset):
            def __iter__(self):
                for batch in module._batches(module.val_data):
                    module.val_batches += 1
                    yield batch

        return DataLoader(Fixed(), batch_size=None)

    def state_dict(self) -> dict:
        return {"frames": self.frames}

    def load_state_dict(self, state: dict) -> None:
        self.frames = state["frames"]


class CrashAtStep(L.Callback):
    """Raises before optimiser step ``step`` (a kill in the middle of an epoch)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_start(self, trainer: L.Trainer, *args) -> None:
        if trainer.global_step == self.step:
            raise RuntimeError(f"simulated crash at step {self.step}")


@mark_actor_critic_factory
def marked_mlp(observation_spec, action_spec, **options):
    """The core MLP factory, marked as a plugin's would be (tests of the phase registry)."""
    return build_actor_critic(observation_spec, action_spec, **options)


def unmarked_mlp(observation_spec, action_spec, **options):
    return build_actor_critic(observation_spec, action_spec, **options)
