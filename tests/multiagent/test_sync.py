"""Sync guarantees: a read equals the shared model, and a publish is never seen half-done."""

from __future__ import annotations

import multiprocessing as mp
import time
from functools import partial

import torch

from meeple.phases.dqn.actor import sync_local_copies
from meeple.phases.dqn.dqn import DQNSpec, make_dqn_model
from meeple.phases.dqn.shared import SharedModel
from tests.multiagent.workers import fill, naive_publisher, publisher

SPEC = DQNSpec(obs_dim=6, num_actions=3, hidden=(8, 8))
make_model = partial(make_dqn_model, SPEC)


def values(model: torch.nn.Module) -> set[float]:
    """Distinct values over every entry of every tensor of the model (online and target)."""
    return {float(v) for t in model.state_dict().values() for v in t.flatten().unique()}


def same_state(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_state_dict_holds_online_and_target_networks():
    keys = make_model().state_dict().keys()
    assert any(k.startswith("value_network_params.") for k in keys)
    assert any(k.startswith("target_value_network_params.") for k in keys)


def test_publish_then_read_gives_the_published_weights_and_version():
    shared = SharedModel(make_model)
    learner, local = make_model(), make_model()
    fill(learner, 3.0)
    assert shared.version == 0
    assert shared.publish(learner) == 1
    assert not same_state(local, learner)
    assert shared.read_into(local) == 1
    assert same_state(local, learner)
    assert values(local) == {3.0}


def test_actor_copy_equals_shared_model_right_after_sync():
    models = [SharedModel(make_model), SharedModel(make_model)]
    local = [make_model(), make_model()]
    versions = [m.read_into(c) for m, c in zip(models, local)]
    assert all(same_state(m.latest(), c) for m, c in zip(models, local))
    learner = make_model()
    fill(learner, 7.0)
    models[1].publish(learner)
    assert not same_state(models[1].latest(), local[1])
    assert sync_local_copies(models, local, versions) == 1  # only the agent whose model changed
    assert versions == [0, 1]
    for m, c in zip(models, local):
        assert same_state(m.latest(), c)
    assert sync_local_copies(models, local, versions) == 0


def test_slow_publish_is_atomic_for_a_reader_in_another_process():
    """A learner process publishes slowly (sleeps between tensors); every read sees one version."""
    ctx = mp.get_context("spawn")
    shared = SharedModel(make_model, ctx=ctx)
    publishes, delay = 12, 0.01  # ~12 tensors per publish: >= 0.12 s inside each publish
    writer = ctx.Process(target=publisher, args=(shared, make_model, publishes, delay), daemon=True)
    writer.start()
    local, seen, reads = make_model(), set(), 0
    try:
        deadline = time.monotonic() + 120
        while shared.version < publishes and time.monotonic() < deadline:
            version = shared.read_into(local)
            reads += 1
            got = values(local)
            # the initial random weights (version 0) are many values; any later read must be uniform
            if version > 0:
                assert got == {float(version)}, (
                    f"read of version {version} mixes values {sorted(got)}"
                )
                seen.add(version)
    finally:
        writer.join(timeout=30)
    assert writer.exitcode == 0
    assert shared.read_into(local) == publishes and values(local) == {float(publishes)}
    assert len(seen) >= 3, (
        f"the reader overlapped too few publishes to test anything ({reads} reads)"
    )


def test_naive_publish_is_seen_half_done():
    """Negative control: without the protocol, the same reader does see torn models."""
    ctx = mp.get_context("spawn")
    target = make_model()
    fill(target, 0.0)
    target.share_memory()
    writer = ctx.Process(target=naive_publisher, args=(target, make_model, 6, 0.01), daemon=True)
    writer.start()
    local, torn = make_model(), 0
    try:
        deadline = time.monotonic() + 120
        while writer.is_alive() and time.monotonic() < deadline:
            with torch.no_grad():
                local.load_state_dict(target.state_dict())
            torn += len(values(local)) > 1
            time.sleep(0.002)
    finally:
        writer.join(timeout=30)
    assert torn > 0
