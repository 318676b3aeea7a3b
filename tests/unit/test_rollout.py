"""The collector -> Lightning bridge: rollouts, minibatches, versions, weight pushes."""

from functools import partial

import torch

from meeple.cli.train import build_run
from meeple.data.collectors import build_collector
from meeple.env_factory import make_env

CARTPOLE = {"backend": "gym", "id": "CartPole-v1"}


class FakeTrainer:
    world_size, global_rank = 1, 0

    def __init__(self, module):
        self.lightning_module = module


def test_dataset_yields_each_rollout_with_ppo_epochs_of_shuffled_minibatches(compose):
    parts = build_run(compose(["debug=tiny", "phase.rollout_steps=8", "phase.minibatch_size=4"]))
    dm, module = parts.datamodule, parts.module
    dm.trainer = FakeTrainer(module)
    dm.setup("fit")
    assert dm.collector is None  # built at the first rollout, once the module is on its device
    try:
        loader = dm.train_dataloader()
        assert dm.frames_per_batch == 2 * 8  # num_envs * workers * rollout_steps
        (rollout,) = list(loader)  # one Lightning batch per rollout ...
        assert len(loader.dataset) == 1 and rollout.data.batch_size == (16,)
        batches = list(rollout)  # ... holding ppo_epochs * minibatches minibatches
        assert len(batches) == len(rollout) == 2 * (16 // 4)
        assert all(b.batch_size == (4,) for b in batches)
        assert all("advantage" in b.keys() and "value_target" in b.keys() for b in batches)
        # Each epoch is a permutation of the same rollout.
        first = torch.cat([b["observation"] for b in batches[:4]])
        second = torch.cat([b["observation"] for b in batches[4:]])
        assert not torch.equal(first, second)
        assert torch.equal(first.sort(0).values, second.sort(0).values)
        assert {b["policy_version"].unique().item() for b in batches} == {0}

        list(loader)  # next rollout: stamped with the next version
        assert dm.policy_version == 2 and dm.frames == 32
        assert dm.stats["perf/policy_lag"] == 0
        assert dm.stats["perf/frames_per_s"] > 0
    finally:
        dm.teardown("fit")


def _always(action: int, policy):
    """Make the logits network prefer one action overwhelmingly."""
    head = [m for m in policy.modules() if isinstance(m, torch.nn.Linear)][-1]
    with torch.no_grad():
        head.weight.zero_()
        head.bias.copy_(torch.tensor([-50.0, 50.0]) if action == 1 else torch.tensor([50.0, -50.0]))


def test_multisync_workers_receive_weights_at_rollout_boundaries(compose):
    parts = build_run(compose(["debug=tiny"]))
    policy = parts.module.policy
    _always(0, policy)
    env_fns = [partial(make_env, CARTPOLE, num_envs=2, seed=s) for s in (1, 2)]
    collector = build_collector("multisync", env_fns, policy, frames_per_batch=32)
    try:
        batches = iter(collector)
        assert (next(batches)["action"] == 0).all()
        _always(1, policy)
        collector.update_policy_weights_()
        next(batches)  # may hold steps taken before the update
        assert (next(batches)["action"] == 1).all()
    finally:
        collector.shutdown()


def test_env_factory_adds_episode_bookkeeping_and_seeds():
    a = make_env(CARTPOLE, num_envs=2, seed=3)
    b = make_env(CARTPOLE, num_envs=2, seed=3)
    torch.testing.assert_close(a.reset()["observation"], b.reset()["observation"])
    td = a.rand_step(a.reset())
    assert "episode_reward" in td["next"].keys() and "step_count" in td["next"].keys()
    c = make_env(CARTPOLE, num_envs=2, seed=4)
    assert not torch.equal(c.reset()["observation"], b.reset()["observation"])
