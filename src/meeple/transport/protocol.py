"""Wire format of the env-server protocol (docs/protocol.md), shared by client and server.

Frames are ``<B I I`` headers (msg_type, msg_id, body_len) and a body. Step results are
fixed-size records whose layout both sides derive from :class:`Spaces`; numpy structured
dtypes with explicit offsets read and write them without copying. ``Spaces``, the record
layout and the errors they raise live in :mod:`meeple.envs.spaces` (in-process array envs
write the same records) and are re-exported here.
"""

from __future__ import annotations

import struct
from enum import IntEnum

import numpy as np

# The record layout and its SPACES block are the array-env ABI (meeple.envs.spaces): envs write
# records in process, this protocol carries them. Re-exported so the wire format reads in one place.
from meeple.envs.spaces import (  # noqa: F401
    DTYPE_CODES,
    RECORD_HEAD,
    ErrorCode,
    ProtocolError,
    Spaces,
    decode_name,
    dtype_code,
    dtype_of,
    encode_name,
    round_up,
)

VERSION = 1
MAGIC = 0x5045454D  # "MEEP" little-endian
HEADER = struct.Struct("<BII")
HEADER_SIZE = HEADER.size  # 9
DEFAULT_MAX_BODY = 64 * 1024 * 1024


class MsgType(IntEnum):
    HELLO = 1
    SPACES = 2
    RESET = 3
    STEP = 4
    STEP_MULTI = 5
    OBSERVE = 6
    HEALTH = 7
    CLOSE = 8
    SHM_ATTACH = 9
    ERROR = 255


# Message types the hot paths compare against, as plain ints: comparing with an IntEnum
# member costs ~0.1 us, several per request.
RESET, STEP, STEP_MULTI = int(MsgType.RESET), int(MsgType.STEP), int(MsgType.STEP_MULTI)
OBSERVE, CLOSE, ERROR = int(MsgType.OBSERVE), int(MsgType.CLOSE), int(MsgType.ERROR)


# -- frames ---------------------------------------------------------------------------------------


def encode_frame(msg_type: int, msg_id: int, body: bytes | bytearray | memoryview = b"") -> bytes:
    return HEADER.pack(msg_type, msg_id, len(body)) + bytes(body)


def decode_header(
    data: bytes | memoryview, max_body: int = DEFAULT_MAX_BODY
) -> tuple[int, int, int]:
    """``(msg_type, msg_id, body_len)``; raises ProtocolError for short headers or oversized bodies."""
    if len(data) < HEADER_SIZE:
        raise ProtocolError(
            ErrorCode.MALFORMED, f"truncated frame header: {len(data)} of {HEADER_SIZE} bytes"
        )
    msg_type, msg_id, body_len = HEADER.unpack_from(data)
    if body_len > max_body:
        raise ProtocolError(
            ErrorCode.TOO_LARGE, f"body_len {body_len} exceeds the maximum {max_body}"
        )
    return msg_type, msg_id, body_len


def decode_frame(data: bytes, max_body: int = DEFAULT_MAX_BODY) -> tuple[int, int, bytes]:
    """One whole frame -> ``(msg_type, msg_id, body)``; its length must match ``body_len``."""
    msg_type, msg_id, body_len = decode_header(data, max_body)
    if len(data) != HEADER_SIZE + body_len:
        raise ProtocolError(
            ErrorCode.MALFORMED,
            f"frame is {len(data)} bytes but its header announces {HEADER_SIZE + body_len}",
        )
    return msg_type, msg_id, bytes(data[HEADER_SIZE:])


# -- bodies ---------------------------------------------------------------------------------------


def encode_hello_request(version: int = VERSION) -> bytes:
    return struct.pack("<IH", MAGIC, version)


def decode_hello_request(body: bytes) -> int:
    """The client's version; raises for a wrong length or magic."""
    _expect_len(body, 6, "HELLO")
    magic, version = struct.unpack("<IH", body)
    if magic != MAGIC:
        raise ProtocolError(
            ErrorCode.MALFORMED, f"HELLO magic 0x{magic:08X}; expected 0x{MAGIC:08X} ('MEEP')"
        )
    return version


def encode_hello_reply(server: str, version: int = VERSION) -> bytes:
    name = server.encode()
    return struct.pack("<HH", version, len(name)) + name


def decode_hello_reply(body: bytes) -> tuple[int, str]:
    version, n = struct.unpack_from("<HH", body)
    return version, bytes(body[4 : 4 + n]).decode()


def encode_reset(seed: int | None) -> bytes:
    return struct.pack("<BQ", seed is not None, 0 if seed is None else seed % 2**64)


def decode_reset(body: bytes) -> int | None:
    _expect_len(body, 9, "RESET")
    has_seed, seed = struct.unpack("<BQ", body)
    return seed if has_seed else None


def encode_actions(actions: np.ndarray) -> bytes:
    return np.ascontiguousarray(actions, dtype="<i4").tobytes()


def decode_actions(body: bytes, count: int, what: str) -> np.ndarray:
    if len(body) != 4 * count:  # checked first: the message is built only when it is sent
        _expect_len(body, 4 * count, what, f"{count} int32 actions")
    return np.frombuffer(body, dtype="<i4")


def encode_error(code: int, text: str) -> bytes:
    return struct.pack("<H", int(code)) + text.encode()


def decode_error(body: bytes) -> ProtocolError:
    if len(body) < 2:
        return ProtocolError(ErrorCode.MALFORMED, "ERROR reply without a code")
    (code,) = struct.unpack_from("<H", body)
    return ProtocolError(code, bytes(body[2:]).decode(errors="replace"))


HEALTH = struct.Struct("<QIIII")
HEALTH_FIELDS = ("steps", "env_errors", "bad_requests", "num_workers", "clients")


def encode_health(**values: int) -> bytes:
    return HEALTH.pack(*(int(values[k]) for k in HEALTH_FIELDS))


def decode_health(body: bytes) -> dict[str, int]:
    _expect_len(body, HEALTH.size, "HEALTH reply")
    return dict(zip(HEALTH_FIELDS, HEALTH.unpack(body)))


def _expect_len(body: bytes, n: int, what: str, accepted: str = "") -> None:
    if len(body) != n:
        extra = f" ({accepted})" if accepted else ""
        raise ProtocolError(
            ErrorCode.MALFORMED, f"{what} body is {len(body)} bytes; expected {n}{extra}"
        )


# -- spaces and records ---------------------------------------------------------------------------


def records_to_json(spaces: Spaces, records: np.ndarray) -> dict:
    return {
        "obs": records["obs"].tolist(),
        "mask": records["mask"].tolist(),
        "reward": records["reward"].tolist(),
        "done": records["done"].tolist(),
        "truncated": records["truncated"].tolist(),
        "info": {name: records["info_" + name].tolist() for name, _ in spaces.info},
    }


def records_from_json(spaces: Spaces, data: dict, count: int) -> np.ndarray:
    records = spaces.new_records(count)
    try:
        for key in ("obs", "mask", "reward", "done", "truncated"):
            records[key] = np.asarray(data[key]).reshape(records[key].shape)
        for name, _ in spaces.info:
            records["info_" + name] = data["info"][name]
    except (KeyError, ValueError) as err:
        raise ProtocolError(
            ErrorCode.MALFORMED, f"JSON result does not match SPACES ({err!r})"
        ) from err
    return records


# protocol.md's OBSERVE all_seats addition, which meeple's Python server does not serve
OBSERVE_ALL_SEATS_UNSERVED = (
    "OBSERVE for all seats is not served by meeple's Python env server (its array envs observe "
    "the seat to move only); the TypeScript host library serves it"
)
