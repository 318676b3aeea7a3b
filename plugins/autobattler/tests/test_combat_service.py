"""Batched combat through the transport: the Node server's fights run by the torch service.

``node dist/server.js --game autobattler --combat batched:PATH`` hands every fight of one env
request (per worker) to ``python -m meeple_autobattler.combat_server`` in one exchange; the games
must be the same as with the game's own fights (``--combat local``).
"""

import socket
import struct

import numpy as np
import pytest
import torch

from meeple.envs.spaces import ErrorCode, ProtocolError
from meeple.transport import node
from meeple.transport.client import connect
from meeple.transport.launch import ServerProcess, default_address
from meeple.transport.protocol import HEADER, HEADER_SIZE, MsgType, decode_error
from meeple_autobattler import combat
from meeple_autobattler.backend import start_server
from meeple_autobattler.combat_server import FIGHTS, RESULT_INTS, service_command

from .test_game import random_game_trace


@pytest.fixture(scope="module")
def dist():
    return node.build()


def start_service() -> ServerProcess:
    address = default_address("socket", "combat-service-test")
    command = service_command(address)
    return ServerProcess({}, transport="socket", num_envs=0, address=address, command=command)


@pytest.fixture(scope="module")
def service(dist):
    svc = start_service()
    yield svc
    svc.stop()


def serve(transport: str, combat_opt: str, num_envs: int, workers: int | None) -> ServerProcess:
    return start_server(num_envs, transport=transport, num_workers=workers, combat=combat_opt)


def trace(transport: str, combat_opt: str, workers: int | None, steps: int = 160) -> list:
    server = serve(transport, combat_opt, 3, workers)
    try:
        client = connect(transport, server.address)
        out = random_game_trace(client, seed=9, steps=steps)
        client.close()
        return out
    finally:
        server.stop()


def test_batched_combat_plays_the_same_games(service):
    local = trace("socket", "local", None)
    for transport, workers in (("socket", None), ("shm", 2)):
        batched = trace(transport, f"batched:{service.address}", workers)
        assert len(batched) == len(local)
        for k, (x, y) in enumerate(zip(local, batched)):
            for field in x.dtype.names:
                np.testing.assert_array_equal(x[field], y[field],
                                              err_msg=f"{transport} step {k} {field}")
    rounds = max(int(r["info_round"].max()) for r in local)
    assert rounds >= 3, "the traces cross several combat rounds"


def exchange(path: str, frame: bytes) -> tuple[int, int, bytes]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(path)
        s.sendall(frame)
        data = b""
        while len(data) < HEADER_SIZE + (
            HEADER.unpack(data[:HEADER_SIZE])[2] if len(data) >= HEADER_SIZE else 0
        ):
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            data += chunk
    msg_type, msg_id, _ = HEADER.unpack(data[:HEADER_SIZE])
    return msg_type, msg_id, data[HEADER_SIZE:]


def test_service_answers_fights_and_rejects_malformed_frames(service):
    rng = np.random.default_rng(0)
    units = np.zeros((2, 32, 9), dtype=np.int32)
    for f in range(2):
        for u in (0, 1, 16, 17, 18):
            side, cell = divmod(u, 16)
            row, col = (4, cell) if side == 0 else (1, 7 - cell)
            units[f, u] = [1, row, col, rng.integers(50, 200), rng.integers(8, 30),
                           rng.integers(0, 6), rng.integers(18, 40), rng.integers(1, 4),
                           rng.integers(0, 4)]
    body = struct.pack("<I", 2) + units.astype("<i4").tobytes()
    msg_type, msg_id, reply = exchange(service.address, HEADER.pack(FIGHTS, 7, len(body)) + body)
    assert (msg_type, msg_id) == (FIGHTS, 7)
    got = np.frombuffer(reply, dtype="<i4").reshape(2, RESULT_INTS)
    want = combat.simulate(torch.from_numpy(units))
    np.testing.assert_array_equal(got[:, 0], want.winner.numpy())
    np.testing.assert_array_equal(got[:, 1:], want.hp.numpy())

    bad = struct.pack("<I", 3) + units.astype("<i4").tobytes()  # count 3, two fights
    msg_type, msg_id, reply = exchange(service.address, HEADER.pack(FIGHTS, 8, len(bad)) + bad)
    err = decode_error(reply)
    assert (msg_type, msg_id, err.code) == (MsgType.ERROR, 8, ErrorCode.MALFORMED)
    assert "count 3" in str(err) and "expected" in str(err)
    msg_type, _, reply = exchange(service.address, HEADER.pack(MsgType.STEP, 9, 0))
    assert msg_type == MsgType.ERROR and decode_error(reply).code == ErrorCode.UNKNOWN_TYPE


@pytest.mark.parametrize("transport,workers", [("socket", None), ("shm", 2)])
def test_a_dead_service_gives_a_clear_env_error(dist, transport, workers):
    svc = start_service()
    server = serve(transport, f"batched:{svc.address}", 2, workers)
    try:
        client = connect(transport, server.address, timeout_s=20)
        random_game_trace(client, seed=1, steps=25)  # a few rounds: the workers are connected
        svc.stop()
        with pytest.raises(ProtocolError) as raised:
            random_game_trace(client, seed=2, steps=60)
        assert raised.value.code == ErrorCode.ENV_EXCEPTION
        assert "batched fights service" in str(raised.value) and svc.address in str(raised.value)
        client.close()
    finally:
        server.stop()
        svc.stop()


def test_backend_starts_the_service_and_it_ends_with_the_env(dist):
    import importlib

    from meeple.transport.client import make_remote_env

    # the package's ``backend`` attribute is the backend instance, not the module
    backend = importlib.import_module("meeple_autobattler.backend")

    env_cfg = {"backend": "autobattler", "seats": 8, "combat": "batched",
               "combat_device": "cpu"}
    env = make_remote_env(env_cfg, {"type": "shm", "num_workers": 2}, num_envs=16)
    try:
        service = backend._services[-1]
        assert service.proc.poll() is None
        env.reset()
    finally:
        env.close()
    service.proc.wait(timeout=20)  # its clients (the Node server's workers) are gone
    with pytest.raises(Exception, match="env.combat"):
        backend.combat_option({"combat": "gpu"})
