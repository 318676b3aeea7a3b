"""Corpus loader: batch contents, disjoint worker slices covering every sample once per epoch,
all six suit permutations per game over six epochs, exact resume, the Lightning datamodule."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch

from meeple_mahjong import augment
from meeple_mahjong.corpus import codec, shards
from meeple_mahjong.corpus.datamodule import CorpusDataModule
from meeple_mahjong.corpus.loader import (
    ACTION_CATEGORY,
    CorpusLoader,
    ShardDataset,
)


def _dataset(out, **kw):
    kw = {"batch_size": 64, "buffer_size": 300, "reserve_fraction": 0.25, "seed": 5, **kw}
    return ShardDataset(shards.shard_paths(out, "train"), **kw)


def _row_keys(batch):
    """One hashable key per sample (its game and planes); with augmentation off."""
    obs = batch["observation"].numpy()
    return [(int(g), obs[i].tobytes()) for i, g in enumerate(batch["game"])]


def _shard_keys(out):
    rows = codec.concat([codec.read_shard(p) for p, _ in shards.shard_paths(out, "train")])
    obs = codec.unpack_obs(rows["bits"], rows["codes"], rows["scalars"])
    return Counter((int(g), obs[i].tobytes()) for i, g in enumerate(rows["game"]))


def test_batch_keys_types_and_targets(tiny_corpus):
    _, out = tiny_corpus
    b = next(iter(_dataset(out, rank_points=(1.0, 0.5, 0.0, -2.0))))
    n = 64
    assert b["observation"].shape == (n, 84, 34) and b["observation"].dtype == torch.float32
    assert b["action_mask"].shape == (n, 155) and b["action_mask"].dtype == torch.bool
    assert b["action_mask"][torch.arange(n), b["action"]].all()  # the action taken is legal
    assert b["tenpai"].shape == (n, 3) and b["danger"].shape == (n, 34)
    assert b["tenpai"].dtype == b["danger"].dtype == b["return"].dtype == torch.float32
    assert torch.equal(b["return"], torch.tensor([1.0, 0.5, 0.0, -2.0])[b["rank"]])
    assert torch.equal(b["category"], torch.from_numpy(ACTION_CATEGORY)[b["action"]])
    assert b["action"].dtype == b["rank"].dtype == b["category"].dtype == torch.int64
    assert (b["weight"] == 1).all() and list(b["_pos"]) == [0, 0, 0]
    # categories follow the action table of docs/mahjong_encoding.md
    assert [ACTION_CATEGORY[i] for i in (0, 36, 37, 73, 74, 80, 82, 150, 151, 152, 153, 154)] == \
        [0, 0, 1, 1, 2, 3, 4, 4, 5, 5, 6, 7]  # fmt: skip


@pytest.mark.parametrize("workers", [0, 2])
def test_slices_are_disjoint_and_cover_each_epoch(tiny_corpus, workers):
    """2 workers: ~2 s of worker start-up per epoch."""
    _, out = tiny_corpus
    ds = _dataset(out, augment=False)
    loader = CorpusLoader(ds, num_workers=workers, track=False)
    want = _shard_keys(out)
    for epoch in range(2):
        by_role: dict[int, Counter] = {}
        batches = list(loader)
        assert len(batches) == len(loader)
        for b in batches:
            by_role.setdefault(int(b["_pos"][1]), Counter()).update(_row_keys(b))
            loader.advance(b)
        assert sum(by_role.values(), Counter()) == want  # every sample exactly once
        roles = list(by_role.values())
        for i in range(len(roles)):
            for j in range(i + 1, len(roles)):
                assert not set(roles[i]) & set(roles[j])  # disjoint slices
        assert loader.epoch == epoch
    # the three-level shuffle draws another order in the next epoch
    first = [_row_keys(b) for b in _dataset(out, augment=False).iter_role(0, 0, 0, 1)]
    second = [_row_keys(b) for b in _dataset(out, augment=False).iter_role(1, 0, 0, 1)]
    assert first != second


def test_every_game_sees_all_six_permutations_in_six_epochs(tiny_corpus):
    _, out = tiny_corpus
    rows = codec.concat([codec.read_shard(p) for p, _ in shards.shard_paths(out, "train")])
    obs = codec.unpack_obs(rows["bits"], rows["codes"], rows["scalars"])
    mask = codec.unpack_mask(rows["mask"])
    danger = codec.unpack_danger(rows["danger"])
    # no shuffle, batch 1: row i of every epoch is sample i, so each permutation can be checked
    ds = _dataset(out, shuffle=False, augment=True, batch_size=len(obs))
    seen: dict[int, set] = {}
    for epoch in range(6):
        (b,) = list(ds.iter_role(epoch, 0, 0, 1))
        ids = (rows["game"] + epoch + 5) % 6  # (epoch + game + seed) mod 6
        where = np.argsort(np.argsort(ids, kind="stable"))  # a batch is grouped by permutation
        for i in range(0, len(obs), 53):  # a spread of samples of every game
            k, j = int(ids[i]), where[i]
            p = augment.SUIT_PERMUTATIONS[k]
            assert np.array_equal(b["observation"][j].numpy(), augment.permute_planes(obs[i], p))
            assert np.array_equal(b["action_mask"][j].numpy(), augment.permute_mask(mask[i], p))
            assert np.array_equal(b["danger"][j].numpy(), augment.permute_planes(danger[i], p))
            assert int(b["action"][j]) == augment.action_permutation(p)[rows["action"][i]]
            seen.setdefault(int(rows["game"][i]), set()).add(k)
    assert len(seen) == 2 and all(v == set(range(6)) for v in seen.values())


@pytest.mark.parametrize("workers", [0, 2])
def test_resume_gives_the_uninterrupted_batches(tiny_corpus, workers):
    """2 workers: ~4 s of worker start-ups."""
    _, out = tiny_corpus
    ds = _dataset(out)
    full = CorpusLoader(ds, num_workers=workers)
    epoch0, epoch1 = list(full), list(full)
    for cut in (1, 7, len(epoch0) - 1):
        first = CorpusLoader(ds, num_workers=workers)
        it = iter(first)
        taken = [next(it) for _ in range(cut)]
        state = first.state_dict()
        del it
        resumed = CorpusLoader(ds, num_workers=workers)
        resumed.load_state_dict(state)
        got = taken + list(resumed) + list(resumed)
        assert len(got) == len(epoch0) + len(epoch1)
        for a, b in zip(got, epoch0 + epoch1):
            assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    with pytest.raises(ValueError, match="same corpus, seed and number of workers"):
        CorpusLoader(ds, num_workers=1 if workers else 2).load_state_dict(state)


def test_datamodule_builds_from_selfplay_and_resumes(tmp_path):
    kw = dict(batch_size=128, buffer_size=512, selfplay={"games": 2, "seed": 3, "policy": "greedy"},
              val_fraction=0.5, shard_size=300)  # fmt: skip

    class _Trainer:
        training = True

    dm = CorpusDataModule(tmp_path / "corpus", **kw)
    dm.prepare_data()
    dm.setup("fit")
    dm.trainer = _Trainer()
    assert (tmp_path / "corpus" / "logs" / "game_00001.mjson").is_file()
    steps = dm.steps_per_epoch
    loader = dm.train_dataloader()
    got = [dm.on_before_batch_transfer(b, 0) for b in loader]
    assert len(got) == steps and dm.frames == dm.train_set.samples
    assert got[0].batch_size == torch.Size([128]) and "_pos" not in got[0].keys()
    val = list(dm.val_dataloader())
    assert sum(len(b["action"]) for b in val) == dm.val_set.samples > 0
    # stop after 3 steps of epoch 1, resume in a new datamodule on the same (reused) corpus
    it = iter(loader)
    ref_rest = [dm.on_before_batch_transfer(b, 0) for b in it][3:]
    dm2 = CorpusDataModule(tmp_path / "corpus", **kw)
    dm2.trainer = _Trainer()
    it = iter(dm2.train_dataloader())
    for _ in range(len(got)):
        dm2.on_before_batch_transfer(next(it), 0)
    del it
    it = iter(dm2.train_dataloader())
    for _ in range(3):
        dm2.on_before_batch_transfer(next(it), 0)
    state = dm2.state_dict()
    dm3 = CorpusDataModule(tmp_path / "corpus", **kw)
    dm3.load_state_dict(state)  # before setup: applied when opened
    dm3.trainer = _Trainer()
    rest = [dm3.on_before_batch_transfer(b, 0) for b in dm3.train_dataloader()]
    assert len(rest) == len(ref_rest) and all((a == b).all() for a, b in zip(rest, ref_rest))
    assert dm3.frames == dm.frames
    with pytest.raises(ValueError, match="holds a corpus built for"):
        CorpusDataModule(tmp_path / "corpus", **{**kw, "selfplay": {"games": 3}}).setup("fit")


def test_lightning_resume_mid_epoch_is_exact(tmp_path):
    """A Lightning fit stopped after 5 steps and resumed from its checkpoint trains on exactly the
    batches of an uninterrupted fit (Lightning prefetches a batch: the position counts steps)."""
    import lightning as L
    from lightning.pytorch.callbacks import Callback

    class Model(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(84 * 34, 155)
            self.seen = []

        def training_step(self, batch, i):
            self.seen.append(batch["action"].clone())
            return torch.nn.functional.cross_entropy(
                self.lin(batch["observation"].flatten(1)), batch["action"]
            )

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    class StopAt5(Callback):
        def on_train_batch_end(self, trainer, module, outputs, batch, i):
            if trainer.global_step == 5:
                trainer.save_checkpoint(tmp_path / "mid.ckpt")
                trainer.should_stop = True

    kw = dict(batch_size=128, buffer_size=512, selfplay={"games": 2, "seed": 3, "policy": "greedy"},
              val_fraction=0.0, shard_size=300)  # fmt: skip

    def fit(callbacks=(), ckpt=None):
        model, dm = Model(), CorpusDataModule(tmp_path / "corpus", **kw)
        L.Trainer(max_epochs=2, logger=False, enable_progress_bar=False, enable_model_summary=False,
                  enable_checkpointing=False, callbacks=list(callbacks), default_root_dir=tmp_path,
                  ).fit(model, dm, ckpt_path=ckpt)  # fmt: skip
        return model.seen, dm

    full, dm = fit()
    assert len(full) == 2 * dm.steps_per_epoch and dm.frames == 2 * dm.train_set.samples
    head, _ = fit([StopAt5()])
    tail, dm = fit(ckpt=tmp_path / "mid.ckpt")
    assert len(head[:5] + tail) == len(full)
    assert all(torch.equal(a, b) for a, b in zip(head[:5] + tail, full))
    assert dm.frames == 2 * dm.train_set.samples


def test_ranks_read_disjoint_slices_and_take_equal_steps(tiny_corpus, monkeypatch):
    """Under DDP (here 2 ranks simulated) every rank takes the same number of steps, on
    disjoint data."""
    _, out = tiny_corpus
    ds = _dataset(out, augment=False, batch_size=50)
    seen, lengths = [], []
    for rank in range(2):
        loader = CorpusLoader(ds)
        monkeypatch.setattr(loader, "_rank_world", lambda rank=rank: (rank, 2))
        sizes = [sum(loader.role_batches(r)) for r in range(2)]
        batches = list(loader)
        lengths.append(len(batches))
        assert len(batches) == len(loader) == min(sizes)
        seen.append(Counter(k for b in batches for k in _row_keys(b)))
    assert lengths[0] == lengths[1]
    assert not set(seen[0]) & set(seen[1])
    assert sum(seen, Counter()) <= _shard_keys(out)
