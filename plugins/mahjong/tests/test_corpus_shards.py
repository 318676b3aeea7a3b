"""Corpus shards: the round trip is bit-exact, a damaged shard names itself, builds are atomic
and reused only for the same manifest."""

from __future__ import annotations

import numpy as np
import pytest

from meeple_mahjong.corpus import codec, manifest, shards
from meeple_mahjong.corpus.samples import GameSamples, log_games


def _all_rows(shards_dir, split):
    parts = [codec.read_shard(p) for p, _ in shards.shard_paths(shards_dir, split)]
    return codec.concat(parts) if parts else None


def test_round_trip_equals_samples(tiny_corpus, selfplay_logs):
    m, out = tiny_corpus
    games = [g for f in sorted(selfplay_logs.glob("*.mjson")) for g in log_games(f)]
    assert all(isinstance(g, GameSamples) for g in games)
    index = shards.read_index(out)
    assert index["samples"]["train"] + index["samples"]["val"] == sum(
        len(g.samples["action"]) for g in games
    )
    assert all(s["samples"] == 500 for s in index["shards"]["train"][:-1])
    ids = [e.id for es in manifest.games_by_file(m).values() for e in es]
    rows = codec.concat([_all_rows(out, "train"), _all_rows(out, "val")])  # chronological order
    expected = {k: np.concatenate([g.samples[k] for g in games]) for k in games[0].samples}
    obs = codec.unpack_obs(rows["bits"], rows["codes"], rows["scalars"])
    assert obs.dtype == np.float32 and np.array_equal(obs, expected["obs"])  # bit-exact, no error
    assert np.array_equal(codec.unpack_mask(rows["mask"]), expected["mask"])
    assert np.array_equal(codec.unpack_danger(rows["danger"]), expected["danger"])
    for k in ("action", "seat", "hand", "rank", "score", "tenpai"):
        assert np.array_equal(rows[k], expected[k]), k
    assert np.array_equal(rows["game"], np.repeat(ids, [len(g.samples["action"]) for g in games]))
    assert (rows["weight"] == 1.0).all()


def test_codec_refuses_lossy_values():
    obs = np.zeros((2, 84, 34), np.float32)
    fields = dict(mask=np.zeros((2, 155), bool), action=np.zeros(2), seat=np.zeros(2), hand=np.zeros(2),
                  rank=np.zeros(2), score=np.zeros(2), tenpai=np.zeros((2, 3), bool),
                  danger=np.zeros((2, 34), bool))  # fmt: skip
    obs[1, 73, 5] = 0.3  # not a multiple of 1/24
    with pytest.raises(ValueError, match="plane 73 .* not a multiple of 1/24"):
        codec.pack({"obs": obs, **fields}, np.zeros(2), np.ones(2))
    obs[1, 73, 5] = 0
    obs[1, 0, 5] = 0.5  # a flag plane
    with pytest.raises(ValueError, match="plane 0 holds a value other than 0/1"):
        codec.pack({"obs": obs, **fields}, np.zeros(2), np.ones(2))
    obs[1, 0, 5] = 0
    obs[0, 81, 3] = 0.5  # a scalar plane that is not broadcast
    with pytest.raises(ValueError, match="plane 81 is not constant"):
        codec.pack({"obs": obs, **fields}, np.zeros(2), np.ones(2))


def test_corrupt_shard_names_the_file(tiny_corpus, tmp_path):
    _, out = tiny_corpus
    src, _ = shards.shard_paths(out, "train")[0]
    data = bytearray(src.read_bytes())
    bad = tmp_path / "flipped.mjs"
    data[-10] ^= 0xFF
    bad.write_bytes(bytes(data))
    with pytest.raises(codec.CorruptShardError, match=r"flipped\.mjs.*CRC"):
        codec.read_shard(bad)
    cut = tmp_path / "cut.mjs"
    cut.write_bytes(src.read_bytes()[:-100])
    with pytest.raises(codec.CorruptShardError, match=r"cut\.mjs"):
        codec.read_shard(cut)
    junk = tmp_path / "junk.mjs"
    junk.write_bytes(b"hello")
    with pytest.raises(codec.CorruptShardError, match=r"junk\.mjs: not a mahjong corpus shard"):
        codec.read_shard(junk)
    with pytest.raises(codec.CorruptShardError, match=r"gone\.mjs is missing"):
        codec.read_shard(tmp_path / "gone.mjs")


def test_build_is_reused_atomic_and_checked(tiny_corpus, tmp_path):
    m, out = tiny_corpus
    first = shards.read_index(out)
    again = shards.build(m, out, shard_size=500, progress=False)
    assert again == first  # same manifest: reused, not rebuilt
    with pytest.raises(FileExistsError, match="another manifest or shard size"):
        shards.build(m, out, shard_size=400, progress=False)
    fresh = tmp_path / "shards"
    shards.build(m, fresh, shard_size=10**6, progress=False)
    assert [len(v) for v in shards.read_index(fresh)["shards"].values()] == [1, 1]
    assert not list(fresh.rglob(".*"))  # no temporary file left behind
    (fresh / "index.json").unlink()  # a build that died before its index is no corpus
    with pytest.raises(FileNotFoundError, match="index.json missing"):
        shards.read_index(fresh)
    shards.build(m, fresh, shard_size=10**6, progress=False)  # builds over the leftovers
    m2 = tmp_path / "m2.sqlite"  # the same logs with no hold-out: another corpus
    m2.write_bytes(m.read_bytes())
    manifest.select(m2, val_fraction=0.0, filters=None)
    with pytest.raises(FileExistsError, match="another manifest"):
        shards.build(m2, fresh, shard_size=10**6, progress=False)
    rebuilt = shards.build(m2, fresh, shard_size=10**6, overwrite=True, progress=False)
    assert rebuilt["samples"]["val"] == 0 and rebuilt["samples"]["train"] == sum(
        first["samples"].values()
    )
    assert len(list((fresh / "val").glob("*.mjs"))) == 0  # the old validation shard is gone


def test_foreign_log_scan_build_batches(tmp_path):
    """The RiichiEnv log (another engine's MJAI) goes scan -> shards -> batches."""
    from pathlib import Path

    from meeple_mahjong.corpus.loader import ShardDataset

    log = Path(__file__).parent / "data" / "riichienv_126_204_0.mjson"
    m = tmp_path / "m.sqlite"
    s = manifest.scan([str(log)], m, val_fraction=0.0, filters=None, progress=False)
    assert s["games"] == 1 and s["samples"] > 100, s
    index = shards.build(m, tmp_path / "shards", progress=False)
    assert index["samples"]["train"] == s["samples"]
    ds = ShardDataset(shards.shard_paths(tmp_path / "shards", "train"), batch_size=64, seed=3)
    batches = list(ds.iter_role(0, 0, 0, 1))
    assert sum(len(b["action"]) for b in batches) == s["samples"]
    b = batches[0]
    assert b["observation"].shape == (64, 84, 34) and b["action_mask"][range(64), b["action"]].all()


def test_parallel_scan_and_build_equal_one_process(tiny_corpus, selfplay_logs, tmp_path):
    """2 processes: the same manifest rows and byte-identical shards (~2 s)."""
    import sqlite3

    m1, _ = tiny_corpus
    m2 = tmp_path / "m.sqlite"
    manifest.scan(
        [str(selfplay_logs)], m2, val_fraction=1 / 3, filters=None, jobs=2, progress=False
    )
    q = "SELECT g.game, g.samples, g.split, s.seat, s.name, s.samples, s.kept FROM games g JOIN seats s ON s.game = g.id ORDER BY g.chrono, s.seat"  # noqa: E501
    assert sqlite3.connect(m1).execute(q).fetchall() == sqlite3.connect(m2).execute(q).fetchall()
    one = shards.build(m1, tmp_path / "one", shard_size=300, progress=False)
    two = shards.build(m2, tmp_path / "two", shard_size=300, jobs=2, progress=False)
    assert one["shards"] == two["shards"] and len(one["shards"]["train"]) > 2
    for split in shards.SPLITS:
        for s in one["shards"][split]:
            assert (tmp_path / "one" / s["file"]).read_bytes() == (
                tmp_path / "two" / s["file"]
            ).read_bytes()
