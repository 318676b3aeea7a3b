"""Golden protocol frames: a language-neutral manifest (frames.json) and Python's encoder.

``python -m tests.transport.golden`` rewrites tests/data/protocol/frames.json and python/*.bin;
the TypeScript encoder writes ts/*.bin (``node dist/golden.js write <dir>``). Tests check that
both decoders read both sets and both encoders produce the same bytes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from meeple.transport import protocol as P
from meeple.transport.protocol import MsgType, Spaces

DATA = Path(__file__).resolve().parents[1] / "data" / "protocol"


def _c4_spaces(n: int) -> Spaces:
    info = (("to_play", np.uint8), ("moves", np.uint8), ("winner", np.int8))
    return Spaces(n, 7, (3, 6, 7), np.float32, num_seats=2, info=info, env_name="connect4")


CUSTOM = Spaces(
    2,
    3,
    (2, 2),
    np.uint8,
    info=(("a", np.int16), ("b", np.float64), ("c", np.uint32)),
    env_name="custom ünïcode",
)


def _records_json(spaces: Spaces, rec: np.ndarray) -> list[dict]:
    return [
        {
            "reward": float(r["reward"]),
            "done": int(r["done"]),
            "truncated": int(r["truncated"]),
            "info": {n: r["info_" + n].item() for n, _ in spaces.info},
            "obs": r["obs"].reshape(-1).tolist(),
            "mask": r["mask"].tolist(),
        }
        for r in rec
    ]


def manifest() -> list[dict]:
    from meeple_connect4 import Connect4ArrayEnv

    game = Connect4ArrayEnv(2)
    rec = game.spaces.new_records(2)
    game.reset(None, rec)
    for moves in ([3, 6], [3, 6], [3, 5], [3, 4]):  # env 0: vertical four for the first player
        game.step(np.array(moves, dtype=np.int32), rec)
    custom = CUSTOM.new_records(2)
    custom["reward"] = [0.5, -2.25]
    custom["done"], custom["truncated"] = [1, 1], [0, 1]
    custom["info_a"], custom["info_b"], custom["info_c"] = (
        [-300, 7],
        [1.5, -0.125],
        [4_000_000_000, 1],
    )
    custom["obs"] = np.arange(8, dtype=np.uint8).reshape(2, 2, 2) * 31
    custom["mask"] = [[1, 0, 1], [0, 1, 1]]
    return [
        {
            "name": "hello_request",
            "msg_type": MsgType.HELLO,
            "msg_id": 1,
            "kind": "hello_request",
            "version": 1,
        },
        {
            "name": "hello_reply",
            "msg_type": MsgType.HELLO,
            "msg_id": 1,
            "kind": "hello_reply",
            "version": 1,
            "server": "meeple/golden",
        },
        {
            "name": "spaces_connect4",
            "msg_type": MsgType.SPACES,
            "msg_id": 2,
            "kind": "spaces",
            "spaces": _c4_spaces(2).to_json(),
        },
        {
            "name": "spaces_custom",
            "msg_type": MsgType.SPACES,
            "msg_id": 3,
            "kind": "spaces",
            "spaces": CUSTOM.to_json(),
        },
        {
            "name": "reset_seeded",
            "msg_type": MsgType.RESET,
            "msg_id": 4,
            "kind": "reset",
            "seed": 2**40 + 5,
        },
        {
            "name": "reset_unseeded",
            "msg_type": MsgType.RESET,
            "msg_id": 5,
            "kind": "reset",
            "seed": None,
        },
        {
            "name": "step",
            "msg_type": MsgType.STEP,
            "msg_id": 6,
            "kind": "actions",
            "actions": [3, 6],
        },
        {
            "name": "step_multi",
            "msg_type": MsgType.STEP_MULTI,
            "msg_id": 7,
            "kind": "actions",
            "actions": [3, 0, 0, 6],
        },
        {"name": "observe", "msg_type": MsgType.OBSERVE, "msg_id": 8, "kind": "empty"},
        {
            "name": "result_connect4",
            "msg_type": MsgType.STEP,
            "msg_id": 9,
            "kind": "records",
            "spaces": _c4_spaces(2).to_json(),
            "records": _records_json(game.spaces, rec),
            "moves": [[3, 6], [3, 6], [3, 5], [3, 4]],
        },
        {
            "name": "result_custom",
            "msg_type": MsgType.STEP,
            "msg_id": 10,
            "kind": "records",
            "spaces": CUSTOM.to_json(),
            "records": _records_json(CUSTOM, custom),
        },
        {
            "name": "health",
            "msg_type": MsgType.HEALTH,
            "msg_id": 11,
            "kind": "health",
            "health": {
                "steps": 2**33 + 1,
                "env_errors": 2,
                "bad_requests": 3,
                "num_workers": 4,
                "clients": 5,
            },
        },
        {
            "name": "error",
            "msg_type": MsgType.ERROR,
            "msg_id": 12,
            "kind": "error",
            "code": 5,
            "text": "action 9 at position 0 is out of range; accepted 0..6",
        },
        {"name": "close", "msg_type": MsgType.CLOSE, "msg_id": 0xFFFFFFFF, "kind": "empty"},
        {
            "name": "shm_attach_reply",
            "msg_type": MsgType.SHM_ATTACH,
            "msg_id": 13,
            "kind": "name",
            "value": "meeple-0123456789abcdef",
        },
    ]


def encode_body(frame: dict) -> bytes:
    kind = frame["kind"]
    if kind == "hello_request":
        return P.encode_hello_request(frame["version"])
    if kind == "hello_reply":
        return P.encode_hello_reply(frame["server"], frame["version"])
    if kind == "spaces":
        return Spaces.from_json(frame["spaces"]).encode()
    if kind == "reset":
        return P.encode_reset(frame["seed"])
    if kind == "actions":
        return P.encode_actions(np.array(frame["actions"]))
    if kind == "empty":
        return b""
    if kind == "records":
        spaces = Spaces.from_json(frame["spaces"])
        rec = spaces.new_records(len(frame["records"]))
        for r, data in zip(rec, frame["records"]):
            r["reward"], r["done"], r["truncated"] = data["reward"], data["done"], data["truncated"]
            for name, value in data["info"].items():
                r["info_" + name] = value
            r["obs"] = np.array(data["obs"]).reshape(spaces.obs_shape)
            r["mask"] = data["mask"]
        return rec.tobytes()
    if kind == "health":
        return P.encode_health(**frame["health"])
    if kind == "error":
        return P.encode_error(frame["code"], frame["text"])
    if kind == "name":
        return P.encode_name(frame["value"])
    raise ValueError(f"unknown golden kind {kind!r}")


def decode_body(frame: dict, body: bytes) -> object:
    """What Python reads back from ``body``, in the manifest's terms."""
    kind = frame["kind"]
    if kind == "hello_request":
        return P.decode_hello_request(body)
    if kind == "hello_reply":
        return list(P.decode_hello_reply(body))
    if kind == "spaces":
        return Spaces.decode(body).to_json()
    if kind == "reset":
        return P.decode_reset(body)
    if kind == "actions":
        return P.decode_actions(body, len(frame["actions"]), "golden").tolist()
    if kind == "empty":
        return body
    if kind == "records":
        spaces = Spaces.from_json(frame["spaces"])
        return _records_json(spaces, spaces.decode_records(body, len(frame["records"])))
    if kind == "health":
        return P.decode_health(body)
    if kind == "error":
        err = P.decode_error(body)
        return [int(err.code), err.text]
    if kind == "name":
        return P.decode_name(body)
    raise ValueError(kind)


def expected_decoded(frame: dict) -> object:
    kind = frame["kind"]
    return {
        "hello_request": lambda: frame["version"],
        "hello_reply": lambda: [frame["version"], frame["server"]],
        "spaces": lambda: frame["spaces"],
        "reset": lambda: frame["seed"],
        "actions": lambda: frame["actions"],
        "empty": lambda: b"",
        "records": lambda: frame["records"],
        "health": lambda: frame["health"],
        "error": lambda: [frame["code"], frame["text"]],
        "name": lambda: frame["value"],
    }[kind]()


def write(folder: Path = DATA) -> None:
    frames = manifest()
    (folder / "python").mkdir(parents=True, exist_ok=True)
    (folder / "frames.json").write_text(json.dumps(frames, indent=1, ensure_ascii=False) + "\n")
    for frame in frames:
        data = P.encode_frame(frame["msg_type"], frame["msg_id"], encode_body(frame))
        (folder / "python" / f"{frame['name']}.bin").write_bytes(data)


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else DATA)
