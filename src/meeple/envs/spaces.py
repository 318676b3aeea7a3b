"""The array-env ABI: what a batch of envs looks like (:class:`Spaces`) and the fixed-size result
records it writes (docs/protocol.md, section 3).

Array envs (:mod:`meeple.envs.array`) write these records in process; the env-server protocol
(:mod:`meeple.transport.protocol`, which re-exports every name here) carries the records and the
SPACES block byte for byte, so a malformed block or record buffer is a :class:`ProtocolError`
wherever it is read. Living here, below ``meeple.transport``, it lets envs describe themselves
without importing the transport that hosts them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from enum import IntEnum
from functools import cached_property

import numpy as np

from meeple.errors import MeepleError

RECORD_HEAD = 8  # reward f32, done u8, truncated u8, 2 padding bytes


class ErrorCode(IntEnum):
    MALFORMED = 1
    UNKNOWN_TYPE = 2
    VERSION = 3
    TOO_LARGE = 4
    BAD_ACTION = 5
    ENV_EXCEPTION = 6
    BUSY = 7
    NOT_READY = 8
    INTERNAL = 9


DTYPE_CODES: dict[int, np.dtype] = {
    code: np.dtype(name).newbyteorder("<")
    for code, name in enumerate(
        [
            "uint8",
            "int8",
            "uint16",
            "int16",
            "uint32",
            "int32",
            "float32",
            "float64",
            "int64",
            "uint64",
        ]
    )
}
_CODE_OF = {dtype.str: code for code, dtype in DTYPE_CODES.items()}


class ProtocolError(MeepleError):
    """A request or reply broke the protocol, or the peer answered ERROR."""

    def __init__(self, code: ErrorCode | int, message: str) -> None:
        self.code = ErrorCode(code) if code in ErrorCode._value2member_map_ else code
        name = self.code.name.lower() if isinstance(self.code, ErrorCode) else str(code)
        super().__init__(f"[{name}] {message}")
        self.text = message


def dtype_code(dtype: np.dtype | str) -> int:
    dtype = np.dtype(dtype).newbyteorder("<")
    if dtype.str not in _CODE_OF:
        accepted = ", ".join(str(d) for d in DTYPE_CODES.values())
        raise ValueError(f"dtype {dtype} has no protocol code; accepted: {accepted}")
    return _CODE_OF[dtype.str]


def dtype_of(code: int) -> np.dtype:
    if code not in DTYPE_CODES:
        raise ProtocolError(
            ErrorCode.MALFORMED, f"unknown dtype code {code}; accepted 0..{len(DTYPE_CODES) - 1}"
        )
    return DTYPE_CODES[code]


def round_up(n: int, multiple: int) -> int:
    return (n + multiple - 1) // multiple * multiple


def encode_name(name: str) -> bytes:
    raw = name.encode()
    return struct.pack("<H", len(raw)) + raw


def decode_name(body: bytes) -> str:
    (n,) = struct.unpack_from("<H", body)
    return bytes(body[2 : 2 + n]).decode()


@dataclass(frozen=True)
class Spaces:
    """What an array env holds (and a server hosts); every record and wire size follows from it."""

    num_envs: int
    num_actions: int
    obs_shape: tuple[int, ...]
    obs_dtype: np.dtype = field(default_factory=lambda: np.dtype("<f4"))
    num_seats: int = 1
    info: tuple[tuple[str, np.dtype], ...] = ()
    env_name: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "obs_shape", tuple(int(s) for s in self.obs_shape))
        object.__setattr__(self, "obs_dtype", DTYPE_CODES[dtype_code(self.obs_dtype)])
        info = tuple((str(n), DTYPE_CODES[dtype_code(d)]) for n, d in self.info)
        object.__setattr__(self, "info", info)
        for name, _ in info:
            if not name.isascii() or not 0 < len(name) < 256:
                raise ValueError(f"info field name {name!r} must be 1..255 ASCII characters")
        if self.num_envs < 1 or self.num_actions < 1 or self.num_seats < 1:
            raise ValueError(f"num_envs, num_actions and num_seats must be >= 1; got {self}")

    # Layout values are cached: a step's client decodes records with them, and building the
    # structured dtype took ~45 us per call on the 2-core VM (most of a 1-env socket round trip).
    @cached_property
    def obs_bytes(self) -> int:
        return int(np.prod(self.obs_shape, dtype=np.int64)) * self.obs_dtype.itemsize

    def with_num_envs(self, num_envs: int) -> Spaces:
        return Spaces(
            num_envs,
            self.num_actions,
            self.obs_shape,
            self.obs_dtype,
            self.num_seats,
            self.info,
            self.env_name,
        )

    def encode(self) -> bytes:
        out = bytearray(
            struct.pack(
                "<IHIBB",
                self.num_envs,
                self.num_seats,
                self.num_actions,
                dtype_code(self.obs_dtype),
                len(self.obs_shape),
            )
        )
        out += struct.pack(f"<{len(self.obs_shape)}I", *self.obs_shape)
        out += struct.pack("<H", len(self.info))
        for name, dtype in self.info:
            out += struct.pack("<BB", dtype_code(dtype), len(name)) + name.encode("ascii")
        return bytes(out + encode_name(self.env_name))

    @classmethod
    def decode(cls, body: bytes) -> Spaces:
        try:
            num_envs, num_seats, num_actions, code, ndim = struct.unpack_from("<IHIBB", body)
            pos = 12
            shape = struct.unpack_from(f"<{ndim}I", body, pos)
            pos += 4 * ndim
            (n_info,) = struct.unpack_from("<H", body, pos)
            pos += 2
            info = []
            for _ in range(n_info):
                dcode, n = struct.unpack_from("<BB", body, pos)
                info.append((bytes(body[pos + 2 : pos + 2 + n]).decode("ascii"), dtype_of(dcode)))
                pos += 2 + n
            name = decode_name(body[pos:])
        except struct.error as err:
            raise ProtocolError(ErrorCode.MALFORMED, f"truncated SPACES block ({err})") from err
        return cls(num_envs, num_actions, shape, dtype_of(code), num_seats, tuple(info), name)

    # -- the record layout (docs/protocol.md section 3) --
    def record_dtype(self, itemsize: int | None = None) -> np.dtype:
        """Numpy structured dtype of one record; ``itemsize`` pads it (shm slots)."""
        if itemsize is None or itemsize == self.record_size:
            return self._record_dtype
        return self._build_record_dtype(itemsize)

    @cached_property
    def _record_dtype(self) -> np.dtype:
        return self._build_record_dtype(self.record_size)

    def _build_record_dtype(self, itemsize: int) -> np.dtype:
        names, formats, offsets = ["reward", "done", "truncated"], ["<f4", "u1", "u1"], [0, 4, 5]
        pos = RECORD_HEAD
        for name, dtype in self.info:
            pos = round_up(pos, dtype.itemsize)
            names.append("info_" + name)
            formats.append(dtype)
            offsets.append(pos)
            pos += dtype.itemsize
        obs_off = round_up(pos, 8)
        names += ["obs", "mask"]
        formats += [(self.obs_dtype, self.obs_shape), ("u1", (self.num_actions,))]
        offsets += [obs_off, obs_off + self.obs_bytes]
        return np.dtype(
            {"names": names, "formats": formats, "offsets": offsets, "itemsize": itemsize}
        )

    @cached_property
    def record_size(self) -> int:
        pos = RECORD_HEAD
        for _, dtype in self.info:
            pos = round_up(pos, dtype.itemsize) + dtype.itemsize
        return round_up(round_up(pos, 8) + self.obs_bytes + self.num_actions, 8)

    def new_records(self, count: int) -> np.ndarray:
        """Zeroed records (padding stays zero, so encoded bodies are deterministic)."""
        return np.zeros(count, dtype=self.record_dtype())

    def decode_records(self, body: bytes | memoryview, count: int) -> np.ndarray:
        expected = count * self.record_size
        if len(body) != expected:
            raise ProtocolError(
                ErrorCode.MALFORMED,
                f"result body is {len(body)} bytes; expected {count} records "
                f"of {self.record_size} = {expected}",
            )
        return np.frombuffer(body, dtype=self.record_dtype(), count=count)

    def to_json(self) -> dict:
        return {
            "num_envs": self.num_envs,
            "num_seats": self.num_seats,
            "num_actions": self.num_actions,
            "obs_dtype": self.obs_dtype.name,
            "obs_shape": list(self.obs_shape),
            "info": [[n, d.name] for n, d in self.info],
            "env": self.env_name,
        }

    @classmethod
    def from_json(cls, data: dict) -> Spaces:
        return cls(
            data["num_envs"],
            data["num_actions"],
            tuple(data["obs_shape"]),
            np.dtype(data["obs_dtype"]),
            data["num_seats"],
            tuple((n, np.dtype(d)) for n, d in data["info"]),
            data.get("env", ""),
        )
