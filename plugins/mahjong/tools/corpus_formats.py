"""Shard format candidates: bytes per sample and decode rate, measured on one built corpus.

    python plugins/mahjong/tools/corpus_formats.py CORPUS_DIR [--batch 1024]

Reads the training shards of CORPUS_DIR (built with `python -m meeple_mahjong.corpus build`),
re-encodes their samples in each candidate format, and times, per CPU second of this process,
decompressing a whole shard and decoding it to float32 (N, 84, 34) planes plus the bool mask:
- float32-zlib1: the encoder's float32 planes, zlib level 1 (the lossless baseline);
- float16-zlib1: planes as float16 (lossy: prints its max error);
- codes-zlib1 / codes-zlib6: uint8 codes (value*24) of the 66 grid planes + float32 scalars
  of the 18 broadcast planes (lossless; codes-zlib1 is what `codec` writes);
- codes-raw: the same uncompressed (the decode cost without zlib).
The mask is bit-packed and zlib-1 compressed in every candidate.
"""

from __future__ import annotations

import argparse
import time
import zlib

import numpy as np

from meeple_mahjong.corpus import codec, shards


def _obs(c):
    return codec.unpack_obs(c["codes"], c["scalars"])


def candidates(c: dict[str, np.ndarray]):
    obs = _obs(c)
    mask_blob = zlib.compress(c["mask"].tobytes(), 1)

    def mask_decode():
        return codec.unpack_mask(np.frombuffer(zlib.decompress(mask_blob), np.uint8).reshape(-1, 20))

    n = len(obs)
    out = {}
    for name, level in (("float32-zlib1", 1),):
        blob = zlib.compress(obs.tobytes(), level)
        out[name] = (len(blob) + len(mask_blob), lambda b=blob: (
            np.frombuffer(zlib.decompress(b), np.float32).reshape(n, 84, 34).copy(), mask_decode()), 0.0)  # fmt: skip
    h = obs.astype(np.float16)
    blob16 = zlib.compress(h.tobytes(), 1)
    err = float(np.abs(h.astype(np.float32) - obs).max())
    out["float16-zlib1"] = (len(blob16) + len(mask_blob), lambda: (
        np.frombuffer(zlib.decompress(blob16), np.float16).reshape(n, 84, 34).astype(np.float32), mask_decode()), err)  # fmt: skip
    for name, level in (("codes-zlib1", 1), ("codes-zlib6", 6)):
        bc, bs = zlib.compress(c["codes"].tobytes(), level), zlib.compress(c["scalars"].tobytes(), level)
        out[name] = (len(bc) + len(bs) + len(mask_blob), lambda bc=bc, bs=bs: (codec.unpack_obs(
            np.frombuffer(zlib.decompress(bc), np.uint8).reshape(n, 66, 34),
            np.frombuffer(zlib.decompress(bs), np.float32).reshape(n, 18)), mask_decode()), 0.0)  # fmt: skip
    out["codes-raw"] = (c["codes"].nbytes + c["scalars"].nbytes + c["mask"].nbytes,
                        lambda: (_obs(c), codec.unpack_mask(c["mask"])), 0.0)  # fmt: skip
    return out


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
