"""Shard format candidates: bytes per sample and decode rate, measured on one built corpus.

    python plugins/mahjong/tools/corpus_formats.py CORPUS_DIR [--batch 1024]

Reads the training shards of CORPUS_DIR (built with `python -m meeple_mahjong.corpus build`),
re-encodes their samples in each candidate format, and times, per CPU second of this process,
decompressing a whole shard and decoding it to float32 (N, 84, 34) planes plus the bool mask:
- float32-zlib1: the encoder's float32 planes, zlib level 1 (the lossless baseline);
- float16-zlib1: planes as float16 (lossy: prints its max error);
- codes66-zlib1 / -zlib6: uint8 codes (value*24) of all 66 non-scalar planes + float32
  scalars of the 18 broadcast planes (lossless), decoded by a table gather;
- bits+codes-zlib1 / -zlib6: the 44 binary planes bit-packed, codes for the 22 fraction
  planes, float32 scalars, decoded into plane slices (`codec`; zlib6 is what it writes);
- bits+codes-raw: the same uncompressed (the decode cost without zlib).
The mask is bit-packed and zlib-1 compressed in every candidate (uncompressed in the raw one).
"""

from __future__ import annotations

import argparse
import time
import zlib

import numpy as np

from meeple_mahjong.corpus import codec, shards


def candidates(c: dict[str, np.ndarray]):
    """name -> (compressed bytes, decode function, max error)."""
    n = len(c["action"])
    obs = codec.unpack_obs(c["bits"], c["codes"], c["scalars"])
    z = {k: zlib.compress(v.tobytes(), 1) for k, v in c.items()}
    mask_bytes = len(z["mask"])

    def load(name, blob, dtype, shape):
        return np.frombuffer(zlib.decompress(blob), dtype).reshape(n, *shape)

    def with_mask(obs_fn):
        return lambda: (obs_fn(), codec.unpack_mask(load("mask", z["mask"], np.uint8, (20,))))

    out = {}
    b32 = zlib.compress(obs.tobytes(), 1)
    out["float32-zlib1"] = (
        len(b32),
        with_mask(lambda: load("obs", b32, np.float32, (84, 34)).copy()),
        0.0,
    )
    h = obs.astype(np.float16)
    b16 = zlib.compress(h.tobytes(), 1)
    err = float(np.abs(h.astype(np.float32) - obs).max())
    out["float16-zlib1"] = (
        len(b16),
        with_mask(lambda: load("obs", b16, np.float16, (84, 34)).astype(np.float32)),
        err,
    )
    grid = np.setdiff1d(np.arange(84), codec.SCALAR_PLANES)
    all_codes = np.rint(obs[:, grid] * codec.CODE_SCALE).astype(np.uint8)  # 66 planes as codes
    for level in (1, 6):
        bc, bs = (
            zlib.compress(all_codes.tobytes(), level),
            zlib.compress(c["scalars"].tobytes(), level),
        )

        def decode(bc=bc, bs=bs):
            codes = load("codes", bc, np.uint8, (66, 34))
            o = np.empty((n, 84, 34), np.float32)
            o[:, grid] = codec.CODE_VALUES[codes]
            o[:, codec.SCALAR_PLANES] = load("scalars", bs, np.float32, (18,))[:, :, None]
            return o

        out[f"codes66-zlib{level}"] = (len(bc) + len(bs), with_mask(decode), 0.0)
    for level in (1, 6):
        blobs = {k: zlib.compress(c[k].tobytes(), level) for k in ("bits", "codes", "scalars")}
        out[f"bits+codes-zlib{level}"] = (sum(map(len, blobs.values())), with_mask(lambda b=blobs: codec.unpack_obs(
            load("bits", b["bits"], np.uint8, (codec.BIT_BYTES,)), load("codes", b["codes"], np.uint8, (22, 34)),
            load("scalars", b["scalars"], np.float32, (18,)))), 0.0)  # fmt: skip
    raw = c["bits"].nbytes + c["codes"].nbytes + c["scalars"].nbytes
    out["bits+codes-raw"] = (raw, lambda: (codec.unpack_obs(c["bits"], c["codes"], c["scalars"]),
                                           codec.unpack_mask(c["mask"])), 0.0)  # fmt: skip
    return {k: (size + (mask_bytes if k != "bits+codes-raw" else c["mask"].nbytes), f, e)
            for k, (size, f, e) in out.items()}  # fmt: skip


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("corpus", help="a built corpus folder (holds index.json)")
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args(argv)
    paths = shards.shard_paths(a.corpus, "train")
    parts = [codec.read_shard(path) for path, _ in paths]
    c = codec.concat(parts)
    n = len(c["action"])
    print(f"{n} samples from {len(paths)} shard(s) of {a.corpus}")
    print(f"{'format':16s} {'bytes/sample':>13s} {'decode samples/s/core':>22s} {'max error':>10s}")
    for name, (size, decode, err) in candidates(c).items():
        c0 = time.process_time()
        for _ in range(a.repeats):
            decode()
        cpu = time.process_time() - c0
        print(f"{name:16s} {size / n:13.1f} {a.repeats * n / cpu:22,.0f} {err:10.2g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
