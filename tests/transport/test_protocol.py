"""The codec: frames, bodies, SPACES and the record layout of docs/protocol.md."""

import numpy as np
import pytest

from meeple.transport import protocol as P
from meeple.transport.protocol import ErrorCode, MsgType, ProtocolError, Spaces

C4 = Spaces(
    3,
    7,
    (3, 6, 7),
    np.float32,
    num_seats=2,
    info=(("to_play", np.uint8), ("moves", np.uint8), ("winner", np.int8)),
    env_name="connect4",
)


def test_header_is_little_endian_9_bytes():
    frame = P.encode_frame(MsgType.STEP, 0x01020304, b"abc")
    assert frame == bytes([4, 4, 3, 2, 1, 3, 0, 0, 0]) + b"abc"
    assert P.decode_frame(frame) == (4, 0x01020304, b"abc")


def test_frame_errors_name_the_problem():
    with pytest.raises(ProtocolError, match="truncated frame header: 5 of 9") as err:
        P.decode_header(b"\x01" * 5)
    assert err.value.code == ErrorCode.MALFORMED
    with pytest.raises(ProtocolError, match="exceeds the maximum 100") as err:
        P.decode_header(P.encode_frame(1, 1, b"x" * 101), max_body=100)
    assert err.value.code == ErrorCode.TOO_LARGE
    with pytest.raises(ProtocolError, match="announces 12"):
        P.decode_frame(P.encode_frame(1, 1, b"abc")[:-1] + b"")


def test_spaces_round_trip_and_json():
    assert Spaces.decode(C4.encode()) == C4
    assert Spaces.from_json(C4.to_json()) == C4
    with pytest.raises(ProtocolError, match="truncated SPACES"):
        Spaces.decode(C4.encode()[:10])
    with pytest.raises(ValueError, match="accepted: uint8"):
        Spaces(1, 2, (1,), np.complex64)


def test_record_layout_matches_the_documented_offsets():
    dtype = C4.record_dtype()
    offsets = {name: dtype.fields[name][1] for name in dtype.names}
    # head 8, info u8 @8, u8 @9, i8 @10 -> obs at round_up(11, 8) = 16, 504 bytes; mask 7 -> 527 -> 528
    assert offsets == {
        "reward": 0,
        "done": 4,
        "truncated": 5,
        "info_to_play": 8,
        "info_moves": 9,
        "info_winner": 10,
        "obs": 16,
        "mask": 520,
    }
    assert C4.record_size == dtype.itemsize == 528
    wide = Spaces(1, 3, (2,), np.uint8, info=(("a", np.uint8), ("b", np.float64), ("c", np.int16)))
    d = wide.record_dtype()
    assert [d.fields[k][1] for k in ("info_a", "info_b", "info_c", "obs", "mask")] == [
        8,
        16,
        24,
        32,
        34,
    ]
    assert wide.record_size == 40


def test_records_round_trip_through_bytes_and_json():
    rec = C4.new_records(3)
    rec["reward"] = [1, -1, 0.5]
    rec["done"] = [1, 0, 0]
    rec["obs"][1, 0, 5, 3] = 1
    rec["mask"][2] = [1, 0, 1, 0, 1, 0, 1]
    rec["info_winner"] = [0, -1, -1]
    back = C4.decode_records(rec.tobytes(), 3)
    assert back.tobytes() == rec.tobytes()
    assert P.records_from_json(C4, P.records_to_json(C4, rec), 3).tobytes() == rec.tobytes()
    with pytest.raises(ProtocolError, match="expected 3 records of 528"):
        C4.decode_records(rec.tobytes()[:-1], 3)


def test_bodies():
    assert P.decode_hello_request(P.encode_hello_request()) == P.VERSION
    with pytest.raises(ProtocolError, match="magic"):
        P.decode_hello_request(b"\0" * 6)
    assert P.decode_hello_reply(P.encode_hello_reply("srv")) == (1, "srv")
    assert P.decode_reset(P.encode_reset(None)) is None
    assert P.decode_reset(P.encode_reset(2**40)) == 2**40
    assert P.decode_actions(P.encode_actions(np.array([1, -2, 3])), 3, "STEP").tolist() == [
        1,
        -2,
        3,
    ]
    with pytest.raises(ProtocolError, match="STEP body is 8 bytes; expected 12"):
        P.decode_actions(b"\0" * 8, 3, "STEP")
    err = P.decode_error(P.encode_error(ErrorCode.BAD_ACTION, "nope"))
    assert err.code == ErrorCode.BAD_ACTION and err.text == "nope"
    health = dict(steps=2**40, env_errors=1, bad_requests=2, num_workers=3, clients=4)
    assert P.decode_health(P.encode_health(**health)) == health


def test_spin_budget_adapts_to_how_waits_end():
    from meeple.transport.waiting import SpinBudget

    budget = SpinBudget()
    for _ in range(5):  # 1, 1/2, 1/4, 1/8, 1/16
        assert budget.next_scale() > 0
        budget.blocked()  # never answered while spinning: stop spinning
    assert budget.scale == 0.0 and budget.next_scale() == 0.0
    probes = [budget.next_scale() for _ in range(128)]
    assert (
        probes.count(1.0) == 2 and probes.count(0.0) == 126
    )  # waits 64 and 128  # a probe of the whole budget every 64th wait
    budget.blocked()  # the probe failed too: still none
    assert budget.scale == 0.0 and budget.next_scale() == 0.0
    budget.spun()
    budget.spun()
    assert budget.scale == 2 * SpinBudget.MIN
    for _ in range(10):
        budget.spun()
    assert budget.scale == 1.0
    for _ in range(5):
        budget.blocked()
    while budget.next_scale() == 0.0:
        budget.blocked()
    budget.yielded()  # a probe answered within the whole budget restores it
    assert budget.scale == 1.0


def test_spin_budget_stops_pure_spinning_that_only_delays_the_peer():
    """Answers that come in the sched_yield phase (a peer that needs this core): the pure spin
    shrinks to none while the yield phase stays; blocked waits answered within the whole
    budget grow it back (a burst of slow answers must not leave every wait on the futex)."""
    from meeple.transport.waiting import SpinBudget

    budget = SpinBudget()
    for _ in range(5):
        budget.yielded()
    assert budget.spin == 0.0 and budget.scale == 1.0
    assert budget.next_scales() == (0.0, 1.0)
    for _ in range(6):
        budget.blocked()  # answers far beyond the budget (an idle learner): block at once
    assert budget.scale == 0.0
    budget.blocked(within_budget=True)  # answered soon after blocking: worth spinning again
    budget.blocked(within_budget=True)
    assert budget.scale == 2 * SpinBudget.MIN and budget.spin == 0.0
    budget.spun()  # an answer within the pure spin brings it back
    assert budget.spin == SpinBudget.MIN and budget.spin <= budget.scale


@pytest.mark.parametrize("transport", ["socket", "shm", "http"])
def test_python_server_refuses_observe_all_seats_clearly(transport):
    """protocol.md's all_seats addition is the Node host library's; ours says so and keeps serving."""
    from meeple.transport.client import connect
    from meeple.transport.launch import ServerProcess

    server = ServerProcess({"backend": "connect4"}, transport=transport, num_envs=2,
                           num_workers=1 if transport == "shm" else 0)
    try:
        client = connect(transport, server.address)
        client.reset(0)
        with pytest.raises(ProtocolError, match="not served by meeple's Python env server") as err:
            client.observe(all_seats=True)
        assert err.value.code == ErrorCode.UNKNOWN_TYPE
        assert client.observe()["obs"].shape[0] == 2  # still serving this client
        client.close()
    finally:
        server.stop()
