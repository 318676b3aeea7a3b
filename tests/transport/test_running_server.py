"""A server the user started (transport.address): the collector drives it, evaluation gets its
own, and a batch that does not match it is one clear error."""

import pytest
import torch

from meeple.errors import ConfigError
from meeple.transport.client import make_remote_env
from tests.transport.conftest import COUNTER, serving


def remote(server, num_envs, **kwargs):
    return make_remote_env(
        COUNTER, {"type": "socket", "address": server.address}, num_envs=num_envs, **kwargs
    )


def test_the_collector_drives_the_served_envs_and_evaluation_gets_its_own():
    with serving(COUNTER, "socket", num_envs=4) as server:
        probe = remote(server, 1)  # reads specs only: any batch size may look
        assert probe.batch_size == torch.Size([4])
        collector = remote(server, 4)
        collector.reset()
        probe.close()
        evaluation = remote(server, 2, evaluation=True)
        try:
            assert evaluation.server is not None and evaluation.server.address != server.address
            assert evaluation.batch_size == torch.Size([2])
            evaluation.reset()  # not `busy`: its own envs
            td = collector.step(collector.reset().set("action", torch.ones(4, dtype=torch.int64)))
            assert td["next", "observation"].shape[0] == 4
        finally:
            evaluation.close()
            collector.close()
        assert server.health()["steps"] == 4


def test_a_batch_size_other_than_the_servers_is_one_clear_error():
    with serving(COUNTER, "socket", num_envs=4) as server:
        env = remote(server, 3)
        with pytest.raises(
            ConfigError,
            match=r"hosts num_envs=4 envs but this run has env.num_envs=3; they must be equal",
        ):
            env.reset()
        env.close()


def test_a_second_driver_is_told_why():
    with serving(COUNTER, "socket", num_envs=2) as server:
        first, second = remote(server, 2), remote(server, 2)
        first.reset()
        with pytest.raises(ConfigError, match="driven by another client .* env.num_workers=1"):
            second.reset()
        second.close()
        first.step(first.reset().set("action", torch.ones(2, dtype=torch.int64)))
        first.close()
