"""League pool: FIFO snapshots beside permanent anchors, LRU device slots, the seat mix, exact resume."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
import torch

from meeple.checkpoint.io import CheckpointError, ChecksumMismatch
from meeple.checkpoint.pool import OpponentPool
from meeple.phases.league.pool import LeaguePool
from tests.conftest import CORRUPTED


def _weights(value: float) -> dict[str, torch.Tensor]:
    return {"w": torch.full((3,), float(value))}


def _factory(built: list[float]):
    def make_policy(state_dict):
        value = float(state_dict["w"][0])
        built.append(value)

        def fn(obs, mask):
            return torch.full((obs.shape[0],), int(value), dtype=torch.int64)

        fn.value = value
        return fn

    return make_policy


def _pool(folder, built=None, **kwargs) -> LeaguePool:
    return LeaguePool(folder, _factory([] if built is None else built), **kwargs)


def _files(folder) -> list[str]:
    return sorted(p.name for p in folder.glob("pool_v*.pt"))


def _round_trip(state):
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return torch.load(io.BytesIO(buffer.getvalue()), weights_only=True)


def test_fifo_eviction_never_touches_anchors_and_disk_follows_checkpoints(tmp_path):
    pool = _pool(tmp_path, max_on_disk=4)
    pool.add_anchor("phase2", _weights(-1), step=900, phase=2)
    names = [pool.promote(_weights(i), step=100 * i, phase=3) for i in range(1, 6)]
    assert names == ["v0002", "v0003", "v0004", "v0005", "v0006"]
    assert pool.anchors() == ["phase2"] and pool.snapshots() == ["v0004", "v0005", "v0006"]
    assert len(_files(tmp_path)) == 6  # evicted files stay until a checkpoint no longer names them
    pool.state_dict()
    assert len(_files(tmp_path)) == 6
    assert pool.policy("v0002").value == 1.0  # a game seated before the eviction still gets it
    pool.state_dict()
    with pytest.raises(KeyError, match="no network 'v0002'"):
        pool.policy("v0002")
    assert pool.built() == []
    assert _files(tmp_path) == ["pool_v0001_step00000900.pt", "pool_v0004_step00000300.pt",
                                "pool_v0005_step00000400.pt", "pool_v0006_step00000500.pt"]
    for name in ["v0007", "v0008", "v0009", "v0010"]:
        assert pool.promote(_weights(0), step=0, phase=3) == name
        pool.state_dict()
    assert pool.names() == ["phase2", "v0008", "v0009", "v0010"]
    assert "pool_v0001_step00000900.pt" in _files(tmp_path) and len(_files(tmp_path)) == 5
    # Evicted snapshots keep their ratings (games in flight; the log shows every generation).
    assert "v0002" in pool.ratings and pool.ratings.rating("v0010") == pool.ratings.inherited("learner", 1.0)

    with pytest.raises(ValueError, match="taken"):
        pool.add_anchor("v0042", _weights(0))
    with pytest.raises(ValueError, match="taken"):
        pool.add_anchor("phase2", _weights(0))
    pool.add_anchor("phase1", _weights(0))
    assert pool.snapshots() == ["v0009", "v0010"]
    pool.add_anchor("bc", _weights(0))
    with pytest.raises(ValueError, match="no room for snapshots"):
        pool.add_anchor("random", _weights(0))


def test_promotion_inherits_the_learner_rating_on_disk_too(tmp_path):
    pool = _pool(tmp_path, sigma_widen=0.5)
    pool.ratings.load_state_dict({"ratings": {"learner": [30.0, 3.0]}, "games": {"learner": 7}})
    name = pool.promote(_weights(1), step=10, phase=3)
    assert pool.ratings.rating(name) == (30.0, 3.5)
    meta = OpponentPool(tmp_path).entry(pool.entry(name).version)
    assert (meta.rating_mu, meta.rating_sigma, meta.step, meta.phase) == (30.0, 3.5, 10, 3)

    # A finished game from the env: "self" copies are rated as the learner (duplicated seats).
    pool.add_anchor("phase2", _weights(2), mu=28.0, sigma=2.0)
    pool.record({"players": ["self", "learner", name, "phase2"], "ranks": [3, 0, 1, 2]})
    assert pool.ratings.games("learner") == 8 and pool.ratings.games("phase2") == 1
    assert pool.ratings.rating("learner")[0] > 30.0 - 1.0


def test_policies_lru_slots_and_counts(tmp_path):
    built: list[float] = []
    pool = _pool(tmp_path, built, device_slots=2)
    a, b, c = (pool.promote(_weights(v), step=v, phase=3) for v in (1, 2, 3))
    obs, mask = torch.zeros(5, 84, 34), torch.ones(5, 155, dtype=torch.bool)
    assert pool.policy(a)(obs, mask).tolist() == [1] * 5
    assert pool.policy(b).value == 2.0 and pool.policy(a).value == 1.0
    assert built == [1.0, 2.0] and pool.built() == [b, a]
    pool.policy(c)  # evicts b, the least recently used
    assert pool.built() == [a, c] and built == [1.0, 2.0, 3.0]
    assert pool.policies[b].value == 2.0 and pool.built() == [c, b]
    assert pool.uses == {a: 2, b: 2, c: 1} and pool.builds == 4
    assert len(pool.built()) <= 2
    assert set(pool.policies) == {a, b, c} and a in pool.policies and "self" not in pool.policies
    with pytest.raises(KeyError, match="no network 'self'"):
        pool.policies["self"]


def test_corrupt_snapshot_is_a_clear_error(tmp_path, request):
    pool = _pool(tmp_path)
    name = pool.promote(_weights(1), step=10, phase=3)
    path = (tmp_path / "pool_v0001_step00000010.pt").resolve()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    request.node.stash.setdefault(CORRUPTED, set()).add(path)
    with pytest.raises(ChecksumMismatch, match=r"snapshot 'v0001' .*does not match"):
        pool.policy(name)


def test_snapshot_write_is_atomic(tmp_path, monkeypatch):
    pool = _pool(tmp_path)
    pool.promote(_weights(1), step=10, phase=3)

    def dies(*args, **kwargs):
        raise OSError("disk full")

    # The process dies between the fsync of the .tmp and its rename (the save protocol's steps 5, 6).
    monkeypatch.setattr("meeple.checkpoint.io._test_pause", dies)
    with pytest.raises(OSError, match="disk full"):
        pool.promote(_weights(2), step=20, phase=3)
    monkeypatch.undo()
    assert list(tmp_path.glob("*.tmp"))  # the dead write's leftover
    assert pool.snapshots() == ["v0001"] and "v0002" not in pool.ratings
    restarted = LeaguePool(tmp_path, _factory([]))  # cleans the partial write, never lists it
    assert [e.version for e in restarted.disk.entries()] == [1]
    assert not list(tmp_path.glob("*.tmp"))
    assert pool.promote(_weights(3), step=30, phase=3) == "v0003"  # numbers never reused


def test_sample_mix_frequencies(tmp_path):
    pool = _pool(tmp_path, mix={"self": 0.5, "pool": 0.3, "anchor": 0.2})
    pool.add_anchor("phase2", _weights(0))
    pool.add_anchor("phase1", _weights(0))
    snaps = [pool.promote(_weights(i), step=i, phase=3) for i in range(3)]
    draws = 20000
    names = pool.sample(np.random.default_rng(7), draws)
    expected = {"self": 0.5, "phase2": 0.1, "phase1": 0.1, **{s: 0.1 for s in snaps}}
    assert set(names) == set(expected)
    for name, p in expected.items():
        # 4.5 binomial standard deviations: a false failure about once in 150000 runs per name.
        assert abs(names.count(name) - draws * p) < 4.5 * math.sqrt(draws * p * (1 - p)), name

    torch_names = pool.sample(torch.Generator().manual_seed(7), draws)
    assert abs(torch_names.count("self") - draws / 2) < 4.5 * math.sqrt(draws / 4)
    with pytest.raises(TypeError, match="torch.Generator or numpy Generator"):
        pool.sample(7, 4)


def test_empty_categories_go_to_self(tmp_path):
    pool = _pool(tmp_path, mix={"self": 0.0, "pool": 0.6, "anchor": 0.4})
    assert pool.sample(np.random.default_rng(0), 500) == ["self"] * 500
    pool.add_anchor("phase2", _weights(0))
    names = pool.sample(np.random.default_rng(0), 2000)
    assert set(names) == {"self", "phase2"}
    assert abs(names.count("phase2") - 800) < 4.5 * math.sqrt(2000 * 0.4 * 0.6)
    with pytest.raises(ValueError, match="summing to 1"):
        _pool(tmp_path, mix={"self": 0.5, "pool": 0.3})
    with pytest.raises(ValueError, match="summing to 1"):
        _pool(tmp_path, mix={"self": 0.8, "league": 0.2})


def test_resume_gives_identical_future_samples_ratings_and_disk(tmp_path):
    folder = tmp_path / "opponent_pool"
    pool = _pool(folder, max_on_disk=3)
    pool.add_anchor("phase2", _weights(-1), step=5, phase=2)
    rng = np.random.default_rng(11)
    for step in range(1, 5):
        name = pool.promote(_weights(step), step=step, phase=3)
        pool.policy(name)
        pool.record({"players": ["learner", *pool.sample(rng, 3)], "ranks": [step % 4, 0, 1, 2]})
    state = _round_trip(pool.state_dict())
    rng_state = rng.bit_generator.state

    # The run goes on, promotes and evicts, then dies before its next checkpoint.
    pool.promote(_weights(9), step=9, phase=3)
    pool.promote(_weights(10), step=10, phase=3)
    pool.state_dict()
    future = [pool.sample(rng, 3) for _ in range(50)]

    resumed = _pool(folder, max_on_disk=3)
    resumed.load_state_dict(state)
    resumed_rng = np.random.default_rng()
    resumed_rng.bit_generator.state = rng_state
    assert resumed.names() == ["phase2", "v0004", "v0005"]
    assert [e.version for e in resumed.disk.entries()] == [1, 4, 5]  # newer promotions dropped
    assert resumed.ratings.state_dict() == state["ratings"] and resumed.uses == state["uses"]
    assert resumed.policy("v0004").value == 3.0
    resumed.promote(_weights(9), step=9, phase=3)
    resumed.promote(_weights(10), step=10, phase=3)
    assert resumed.names() == ["phase2", "v0008", "v0009"]
    assert [[n.replace("v0008", "v0006").replace("v0009", "v0007") for n in resumed.sample(resumed_rng, 3)]
            for _ in range(50)] == future

    # A checkpoint naming a snapshot whose file is gone cannot be resumed silently.
    OpponentPool(folder).remove(1)
    with pytest.raises(CheckpointError, match=r"phase2 \(version 1\)"):
        _pool(folder).load_state_dict(state)
