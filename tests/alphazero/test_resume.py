"""AlphaZero resumes exactly: the replay buffer and the next self-play game's id are in the
checkpoint, so a run interrupted after iteration k and resumed ends with the uninterrupted
run's weights, optimiser, buffer and metrics.

One worker with one game and one leaf in flight makes every evaluation batch a single
position, so self-play itself is deterministic (with several threads the batches, and so the
floating-point results, depend on timing).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tensordict import TensorDict
from torchrl.data import LazyTensorStorage, ReplayBuffer
from torchrl.data.replay_buffers import RandomSampler

from meeple.checkpoint.io import load_verified
from meeple.checkpoint.retention import LATEST
from meeple.checkpoint.run_dir import find_latest_run
from meeple.cli.train import train
from meeple.phases.alphazero.data import load_replay_state, replay_state
from tests.checkpoint.helpers import SimulatedCrash
from tests.checkpoint.test_resume import assert_same, stop_after

BASE = [
    "+experiment=connect4_alphazero", "debug=tiny", "callbacks.progress=null", "tracking=none",
    "phase.iterations=4", "checkpoint.every_n_rollouts=1", "phase.callbacks.curves=null",
    "phase.selfplay.num_workers=1", "phase.selfplay.games_per_worker=1", "phase.selfplay.leaves_per_game=1",
    "phase.selfplay.cache_size=0",
]
# Throughput and timing keys differ between any two runs.
TIMING = ("perf/", "system/", "selfplay/simulations_per_s", "selfplay/positions_per_s", "selfplay/games_per_h",
          "selfplay/queue_latency", "selfplay/evaluator_idle", "selfplay/wall_s")


def learning(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if not k.startswith(TIMING)}


def run_of(task: str):
    return find_latest_run(Path("outputs/runs"), experiment="connect4_alphazero", task=task)


def test_interrupted_then_resumed_equals_uninterrupted(compose, in_tmp, importable_tests):
    full = learning(train(compose([*BASE, "task_name=full"])))
    with pytest.raises(SimulatedCrash):
        train(compose([*BASE, "task_name=cut", *stop_after(2)]))
    resumed = learning(train(compose([*BASE, "task_name=cut", "resume=true"])))

    assert resumed == full
    final_full = load_verified(run_of("full").checkpoint_dir(0) / LATEST)
    final_cut = load_verified(run_of("cut").checkpoint_dir(0) / LATEST)
    for key in ("model_state_dict", "optimizer_state_dict", "SelfPlayDataModule"):
        assert_same(final_full[key], final_cut[key], key)
    data = final_cut["SelfPlayDataModule"]
    assert data["next_game_id"] == data["games"] == 4 * 4  # debug=tiny: 4 games per iteration
    assert len(data["replay"]["samples"]["value"]) == data["replay"]["writer"]["_cursor"] > 0


def test_replay_state_round_trip_after_wrapping():
    """A buffer that has wrapped around restores to the same rows at the same indices, so the
    same generator state draws the same minibatches."""
    def buffer(generator):
        return ReplayBuffer(storage=LazyTensorStorage(10), sampler=RandomSampler(), batch_size=4, generator=generator)

    def rows(start, n):
        v = torch.arange(start, start + n, dtype=torch.float32)
        return TensorDict({"planes": v.view(n, 1, 1, 1), "policy": v[:, None].repeat(1, 2), "value": v,
                           "legal": torch.ones(n, 2, dtype=torch.bool)}, batch_size=[n])

    gen = torch.Generator().manual_seed(3)
    original = buffer(gen)
    original.extend(rows(0, 7))
    original.extend(rows(7, 6))  # 13 written into 10 slots: the cursor wrapped to 3
    state = replay_state(original)
    assert state["writer"]["_cursor"] == 3 and len(state["samples"]["value"]) == 10
    gen_state = gen.get_state()

    restored_gen = torch.Generator()
    restored = buffer(restored_gen)
    restored.extend(rows(100, 4))  # anything there before is replaced
    load_replay_state(restored, state)
    restored_gen.set_state(gen_state)
    assert torch.equal(restored.storage[:10]["value"], original.storage[:10]["value"])
    for _ in range(3):
        assert torch.equal(restored.sample()["value"], original.sample()["value"])
    restored.extend(rows(50, 1))
    original.extend(rows(50, 1))
    assert torch.equal(restored.storage[:10]["value"], original.storage[:10]["value"])



def test_replay_state_stores_whole_number_planes_as_uint8_and_keeps_others():
    buffer = ReplayBuffer(storage=LazyTensorStorage(8), sampler=RandomSampler(), batch_size=2)
    n = 5
    binary = torch.randint(0, 2, (n, 3, 2, 2)).float()
    buffer.extend(TensorDict({"planes": binary, "policy": torch.rand(n, 2), "value": torch.rand(n),
                              "legal": torch.ones(n, 2, dtype=torch.bool)}, batch_size=[n]))
    state = replay_state(buffer)
    assert state["samples"]["planes"].dtype == torch.uint8
    restored = ReplayBuffer(storage=LazyTensorStorage(8), sampler=RandomSampler(), batch_size=2)
    load_replay_state(restored, state)
    assert restored.storage[:n]["planes"].dtype == torch.float32
    assert torch.equal(restored.storage[:n]["planes"], binary)

    fractional = ReplayBuffer(storage=LazyTensorStorage(8), sampler=RandomSampler(), batch_size=2)
    fractional.extend(TensorDict({"planes": binary * 0.5, "policy": torch.rand(n, 2), "value": torch.rand(n),
                                  "legal": torch.ones(n, 2, dtype=torch.bool)}, batch_size=[n]))
    assert replay_state(fractional)["samples"]["planes"].dtype == torch.float32
