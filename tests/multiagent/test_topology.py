"""Lifecycle and isolation of the independent topology (real spawned processes, tiny runs)."""

from __future__ import annotations

import time

import psutil
import pytest
import torch

from meeple.phases.dqn.run import build_independent
from meeple.phases.dqn.shared import buffer_tensors
from meeple.phases.dqn.state import SharedRunState
from meeple.phases.dqn.topology import IndependentTopology, WorkerCrashedError
from tests.multiagent.conftest import shm_leftovers, shm_mapped

# simple_spread observation of agent i: [vel(2), pos(2), landmarks rel. to i (2N), others rel. to i (2(N-1)), comm]
POS = slice(2, 4)
OTHER = slice(8, 10)  # N = 2: landmarks occupy 4:8, the other agent 8:10


def assert_no_survivors(pids: list[int]) -> None:
    for pid in pids:
        if psutil.pid_exists(pid):
            status = psutil.Process(pid).status()
            assert status == psutil.STATUS_ZOMBIE, f"worker {pid} outlived the run ({status})"


def tensor_ptrs(tensors) -> set[int]:
    return {t.untyped_storage().data_ptr() for t in tensors}


def test_tiny_run_finishes_and_keeps_agents_isolated(tiny_cfg):
    before = shm_mapped()  # what earlier tests in this process left mapped is not this run's
    run = build_independent(tiny_cfg())
    reports = []
    run.topology.start()
    pids = run.topology.pids
    ours = shm_mapped() - before
    run.topology.run(lambda kind, sender, payload: reports.append((kind, sender, payload)))
    assert_no_survivors(pids)
    assert run.topology.finished and run.state.env_steps == 400

    # every learner trained, published, and the actor saw every agent's episodes
    # (400 - 100 learning_starts) * 1.0 updates per step: the run ends when both learners did theirs
    assert list(run.state.updates) == [300, 300]
    assert all(m.version > 0 for m in run.state.models)
    episodes = [p for k, _, p in reports if k == "episode"]
    assert len(episodes) == 400 // 25 and all(
        set(p["returns"]) == set(run.agent_names) for p in episodes
    )
    assert {p["agent"] for k, _, p in reports if k == "learner"} == set(run.agent_names)

    # isolation: no parameter tensor or buffer storage is shared between agents
    params = [tensor_ptrs(slot.state_dict().values()) for m in run.state.models for slot in m.slots]
    buffers = [tensor_ptrs(buffer_tensors(b)) for b in run.state.buffers]
    groups = params + buffers
    for i in range(len(groups)):
        for j in range(i + 1, len(groups)):
            assert not groups[i] & groups[j], f"storage shared between groups {i} and {j}"

    # each buffer holds exactly its own agent's transitions: one per env step, in its own frame
    b0, b1 = (b[:400] for b in (b.storage[:] for b in run.state.buffers))
    assert all(len(b) == 400 for b in run.state.buffers)
    # the other agent's position as agent 0 sees it (relative) is agent 1's own position, and back
    torch.testing.assert_close(
        b0["observation"][:, POS] + b0["observation"][:, OTHER], b1["observation"][:, POS]
    )
    torch.testing.assert_close(
        b1["observation"][:, POS] + b1["observation"][:, OTHER], b0["observation"][:, POS]
    )
    torch.testing.assert_close(
        b0["next", "observation"][:, POS] + b0["next", "observation"][:, OTHER],
        b1["next", "observation"][:, POS],
    )
    assert not torch.equal(b0["observation"], b1["observation"])
    assert ours, "expected the run's named semaphores in /dev/shm while it runs"
    run.topology.close()
    assert shm_leftovers(ours) == set()


def finished_run(cfg, **targets):
    """Run to the end; (min learner updates seen at each actor report, the actor's waits,
    each agent's buffer, each agent's final weights)."""
    run = build_independent(cfg, **targets)
    seen = []

    def on_report(kind, sender, payload):
        if kind == "actor":  # the learners' counters once the report is read: never less than then
            seen.append((payload["env_steps"], min(run.state.updates), payload["waited_s"]))

    try:
        run.topology.run(on_report)
        assert run.topology.finished
        buffers = [b.storage[: len(b)].clone() for b in run.state.buffers]
        weights = [m.slots[m.version % 2].state_dict() for m in run.state.models]
        weights = [{k: v.clone() for k, v in w.items()} for w in weights]
    finally:
        run.topology.close()
    return seen, buffers, weights


def test_with_max_update_lag_0_a_slow_learner_changes_nothing(tiny_cfg):
    """At max_update_lag=0 the actor waits after every write until each learner has done the
    updates the pacing allows, and learners cannot do more: a learner 10 ms slower per update
    (a starved CPU share) holds the actor back and the run is bit-identical to a normal one."""
    cfg = tiny_cfg("phase.max_update_lag=0")
    seen, buffers, weights = finished_run(cfg, learner_target="tests.multiagent.workers:slow_learner")
    assert [steps for steps, _, _ in seen] == [50, 100, 150, 200, 250, 300, 350, 400]
    for steps, updates, _ in seen:  # learning_starts 100, 1 update per step
        assert updates >= steps - 100, (steps, updates)
    # the first write past learning_starts asks for updates the learners could not have done yet
    assert seen[-1][2] > 0
    _, normal_buffers, normal_weights = finished_run(cfg)
    for slow, normal in zip(buffers, normal_buffers):
        assert torch.equal(slow["observation"], normal["observation"])
        assert torch.equal(slow["action"], normal["action"])
    for slow, normal in zip(weights, normal_weights):
        assert all(torch.equal(slow[k], normal[k]) for k in normal)


def test_stop_request_ends_every_process_within_the_bound(tiny_cfg):
    run = build_independent(tiny_cfg("phase.total_env_steps=1000000"))
    run.topology.start()
    pids = run.topology.pids
    try:
        deadline = time.monotonic() + 300
        while (
            run.state.env_steps < 300 or min(run.state.updates) < 10
        ) and time.monotonic() < deadline:
            assert all(w.process.is_alive() for w in run.topology.workers)
            time.sleep(0.1)
        assert min(run.state.updates) >= 10, "the run did not get going"
    finally:
        took = run.topology.stop()
    assert took < 5.0, f"stop took {took:.1f}s"
    # every worker ended on its own (exit code 0), none had to be terminated or killed
    assert [w.process.exitcode for w in run.topology.workers] == [0] * len(run.topology.workers)
    assert_no_survivors(pids)
    assert not run.topology.finished
    run.topology.close()


def test_crashing_learner_ends_the_run_with_its_traceback(tiny_cfg):
    before = shm_mapped()
    run = build_independent(
        tiny_cfg("phase.total_env_steps=1000000"),
        learner_target="tests.multiagent.workers:crashing_learner",
    )
    run.topology.start()
    pids = run.topology.pids
    ours = shm_mapped() - before
    t0 = time.monotonic()
    with pytest.raises(WorkerCrashedError) as err:
        run.topology.run()
    assert time.monotonic() - t0 < 300
    message = str(err.value)
    assert err.value.worker == "learner[agent_1]"
    assert message.startswith("learner[agent_1] crashed; the run was stopped")
    assert "RuntimeError: injected learner failure for the crash test" in message
    assert "Traceback (most recent call last)" in message and "crashing_learner" in message
    assert_no_survivors(pids)
    assert all(w.process.exitcode is not None for w in run.topology.workers)
    run.topology.close()
    assert shm_leftovers(ours) == set()


def test_an_actor_that_finishes_and_exits_between_two_reads_is_not_a_crash():
    """The race CI hit: the actor reports FINISHED and exits after one drain of the report queue and
    before the exit check; its exit must be judged only after its last report was read."""
    state = SharedRunState(models=[None], buffers=[None])
    topology = IndependentTopology(
        state,
        {},
        [{}],
        ["agent_0"],
        actor_target="tests.multiagent.workers:finishing_actor",
        learner_target="tests.multiagent.workers:idle_learner",
    )
    topology.start()  # the state is pickled here; the patch below stays in this process
    actor = topology.workers[0].process
    drain = state.drain

    def drain_then_let_the_actor_finish(timeout: float = 0.0):
        got = drain()
        if not got and actor.exitcode is None:
            actor.join(timeout=120)  # it reports FINISHED and exits while nobody reads
        return got

    state.drain = drain_then_let_the_actor_finish
    try:
        topology.run()
        assert topology.finished and actor.exitcode == 0
    finally:
        topology.close()
