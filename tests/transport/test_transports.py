"""Every transport and worker layout plays the same seeded games, and RemoteEnv is a TorchRL env."""

import logging
import os
import stat

import numpy as np
import pytest
import torch
from torchrl.collectors import Collector
from torchrl.envs.utils import check_env_specs

from meeple.envs.array import LocalStepper
from meeple.envs.counter import CounterEnv
from meeple.transport.client import RemoteEnv, connect
from meeple.transport.shm import ShmChannel
from meeple_connect4 import Connect4ArrayEnv
from tests.transport.conftest import CONNECT4, COUNTER, client_for, serving
from tests.transport.traces import assert_same, play


def test_connect4_traces_are_identical_over_every_transport(setup):
    transport, workers = setup
    expected = play(LocalStepper(Connect4ArrayEnv(5)), steps=80)
    assert sum(int(r["done"].sum()) for r in expected) >= 3, "the trace should cross episode ends"
    with (
        serving(CONNECT4, transport, num_envs=5, num_workers=workers) as server,
        client_for(server) as client,
    ):
        assert_same(expected, play(client, steps=80), f"{transport} x{workers}")
        assert client.health()["steps"] == 5 * 80


def test_step_multi_traces_match_in_process(setup):
    transport, workers = setup
    local = Connect4ArrayEnv(3)

    class Multi(LocalStepper):
        def step_multi(self, actions):
            out = self.spaces.new_records(6).reshape(3, 2)
            self.env.step_multi(actions, out)
            return out

    expected = play(Multi(local), steps=60, multi=True)
    # the seat not to move sees an all-zero mask; rewards are +1/-1 at wins
    last = np.concatenate([r["reward"].reshape(-1) for r in expected])
    assert set(np.unique(last)) <= {-1.0, 0.0, 1.0}
    with (
        serving(CONNECT4, transport, num_envs=3, num_workers=workers) as server,
        client_for(server) as client,
    ):
        assert_same(
            expected, play(client, steps=60, multi=True), f"{transport} x{workers} STEP_MULTI"
        )


def test_seeds_reach_env_i_as_seed_plus_i(setup):
    transport, workers = setup
    with (
        serving(COUNTER, transport, num_envs=4, num_workers=workers) as server,
        client_for(server) as client,
    ):
        records = client.reset(100)
        assert records["obs"][:, 2].tolist() == [100, 101, 102, 103]
        expected = play(LocalStepper(CounterEnv(4)), steps=12, seed=5)
        assert_same(expected, play(client, steps=12, seed=5), transport)


def test_a_wrong_action_count_is_refused_as_malformed(setup):
    """Every transport refuses it (shm in the client, which writes the actions in place)."""
    from meeple.transport.protocol import ErrorCode, ProtocolError

    transport, workers = setup
    with (
        serving(COUNTER, transport, num_envs=3, num_workers=workers) as server,
        client_for(server) as client,
    ):
        client.reset(0)
        for actions in ([1], [1, 1, 1, 1]):
            with pytest.raises(ProtocolError, match="3") as err:
                client.step(np.array(actions, dtype=np.int32))
            assert err.value.code == ErrorCode.MALFORMED
            if transport != "shm":  # a malformed frame closes the connection
                break


def test_auto_reset_returns_the_first_observation_with_done():
    with serving(COUNTER, "socket", num_envs=2) as server, client_for(server) as client:
        client.reset(0)
        for t in range(4):  # action t % 4 is illegal at counter t
            r = client.step(np.array([(t + 1) % 4, (t + 2) % 4]))
            assert not r["done"].any() and r["obs"][:, 0].tolist() == [t + 1, t + 1]
        r = client.step(np.array([1, 2]))
        assert r["done"].tolist() == [1, 1] and r["reward"].tolist() == [1, 2]
        assert r["obs"][:, 0].tolist() == [0, 0] and r["obs"][:, 2].tolist() == [1000, 1001]


def test_shm_results_are_zero_copy_views_of_the_segment():
    with serving(COUNTER, "shm", num_envs=3, num_workers=1) as server, client_for(server) as client:
        records = client.reset(0)
        channel: ShmChannel = client.channel
        seg = np.frombuffer(channel.segment.mm, dtype=np.uint8)
        for field in ("obs", "mask"):
            view = torch.from_numpy(records[field])
            assert np.shares_memory(records[field], seg)
            assert seg.ctypes.data <= view.data_ptr() < seg.ctypes.data + seg.size
        before = records["obs"][:, 0].copy()
        client.step(np.array([1, 2, 3]))
        assert (records["obs"][:, 0] == before + 1).all(), "the view shows the next step in place"


@pytest.mark.parametrize("transport", ["socket", "shm", "http"])
def test_remote_env_is_a_torchrl_env(transport):
    with serving(
        CONNECT4, transport, num_envs=4, num_workers=1 if transport == "shm" else 0
    ) as server:
        env = RemoteEnv(connect(transport, server.address))
        check_env_specs(env)
        env.set_seed(0)
        td = env.reset()
        assert td["action_mask"].dtype == torch.bool and td["action_mask"].shape == (4, 7)

        def legal(td):
            return td.set("action", torch.multinomial(td["action_mask"].float(), 1).squeeze(-1))

        collector = Collector(env, legal, frames_per_batch=4 * 50, total_frames=4 * 100)
        batches = list(collector)
        collector.shutdown()
        rollout = batches[-1]
        assert rollout.shape == (4, 50)
        taken = rollout["action"]
        assert rollout["action_mask"].gather(-1, taken.unsqueeze(-1)).all(), (
            "masks travel with observations"
        )
        assert rollout["next", "done"].any()
        env.close()


def test_socket_file_is_private_and_http_binds_loopback():
    with serving(COUNTER, "socket") as server:
        assert stat.S_IMODE(os.stat(server.address).st_mode) == 0o600
    with serving(COUNTER, "http") as server:
        assert server.frontend.httpd.server_address[0] == "127.0.0.1"
    with serving(COUNTER, "shm", num_workers=1) as server:
        seg = f"/dev/shm/{server.segment_name}"
        assert stat.S_IMODE(os.stat(seg).st_mode) == 0o600
    assert not os.path.exists(seg) and not os.path.exists(server.address)


def test_auto_prefers_shm_and_falls_back_to_socket(caplog):
    caplog.set_level(logging.INFO, logger="meeple.transport.client")
    with serving(COUNTER, "shm", num_workers=1) as server:
        client = connect("auto", server.address)
        assert type(client).__name__ == "ShmClient"
        client.close()
    with serving(COUNTER, "socket") as server:
        client = connect("auto", server.address)
        assert type(client).__name__ == "SocketClient"
        client.close()
    assert "using socket (shm skipped: this server runs transport=socket" in caplog.text
