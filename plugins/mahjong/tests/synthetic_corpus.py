"""A synthetic corpus with the batch keys of ``meeple_mahjong.corpus.loader.CorpusDataModule``, for
BC tests of the mahjong network that need no logs.

Each sample holds a hand (plane 0: 1 at 8 random kinds) and one marked kind of it (plane 1); the
legal actions are discarding a held kind and, when plane 2 is lit, riichi with it (index 37 + kind)
or passing (153). The teacher discards, or declares riichi with, the marked kind. Auxiliary
targets are simple functions of other planes: rank = number of lit kinds of plane 3 (0..3), tenpai
= plane 4 at kinds 0..2, danger = plane 5.
"""

from __future__ import annotations

import lightning as L
import torch
from torch.utils.data import DataLoader, IterableDataset

PLANES, KINDS, ACTIONS = 84, 34, 155
RIICHI, PASS = 37, 153


def synthetic_samples(n: int, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    obs = torch.zeros(n, PLANES, KINDS)
    hand = torch.rand(n, KINDS, generator=g).argsort(-1)[:, :8]
    obs[:, 0].scatter_(1, hand, 1.0)
    marked = hand[torch.arange(n), torch.randint(0, 8, (n,), generator=g)]
    obs[torch.arange(n), 1, marked] = 1.0
    riichi = torch.rand(n, generator=g) < 0.3
    obs[riichi, 2] = 1.0
    lit = torch.randint(0, 4, (n,), generator=g)
    obs[:, 3] = (torch.arange(KINDS) < lit.unsqueeze(-1)).float()
    obs[:, 4, :3] = torch.randint(0, 2, (n, 3), generator=g).float()
    obs[:, 5] = torch.randint(0, 2, (n, KINDS), generator=g).float()
    mask = torch.zeros(n, ACTIONS, dtype=torch.bool)
    mask[:, :KINDS] = obs[:, 0] > 0
    mask[riichi, RIICHI : RIICHI + KINDS] = obs[riichi, 0] > 0
    mask[riichi, PASS] = True
    action = torch.where(riichi, RIICHI + marked, marked)
    return {
        "observation": obs,
        "action_mask": mask,
        "action": action,
        "return": lit.float() / 3,
        "rank": lit,
        "tenpai": obs[:, 4, :3].clone(),
        "danger": obs[:, 5].clone(),
        "category": riichi.long(),  # 0 discard, 1 riichi
        "weight": torch.ones(n),
    }


class _Batches(IterableDataset):
    def __init__(self, dm: SyntheticCorpus, data: dict[str, torch.Tensor], train: bool) -> None:
        self.dm, self.data, self.train = dm, data, train

    def __len__(self) -> int:
        return -(-len(self.data["action"]) // self.dm.batch_size)

    def __iter__(self):
        n = len(self.data["action"])
        order = torch.randperm(n, generator=self.dm.generator) if self.train else torch.arange(n)
        for start in range(0, n, self.dm.batch_size):
            index = order[start : start + self.dm.batch_size]
            if self.train:
                self.dm.frames += len(index)
            yield {key: value[index] for key, value in self.data.items()}


class SyntheticCorpus(L.LightningDataModule):
    def __init__(self, *, batch_size: int, seed: int, train: int = 2048, val: int = 512) -> None:
        super().__init__()
        self.batch_size = batch_size
        self.generator = torch.Generator().manual_seed(seed)
        self.train_data = synthetic_samples(train, seed=1)
        self.val_data = synthetic_samples(val, seed=2)
        self.frames = 0

    @property
    def steps_per_epoch(self) -> int:
        return -(-len(self.train_data["action"]) // self.batch_size)

    def train_dataloader(self) -> DataLoader:
        return DataLoader(_Batches(self, self.train_data, True), batch_size=None)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(_Batches(self, self.val_data, False), batch_size=None)

    def state_dict(self) -> dict:
        return {"generator": self.generator.get_state(), "frames": self.frames}

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["generator"])
        self.frames = state["frames"]
