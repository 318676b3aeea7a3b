"""Shard building: the kept decisions of a scanned corpus packed into compressed shards.

    build("corpus/manifest.sqlite", "corpus/shards", shard_size=16384)

Layout of ``out_dir``: ``train/shard_00000.mjs ...``, ``val/shard_00000.mjs ...`` (format in
``codec``) and ``index.json``, written last: a folder without ``index.json`` is not a corpus
(a crashed build leaves none, and every shard is written to a temporary name and renamed).
Games are packed in chronological order; only the decisions of kept seats go in, each with its
manifest game id (the loader's augmentation key) and its source's weight. A game whose sample
count differs from the manifest's (the log changed since the scan) stops the build.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import numpy as np

from meeple.jsonio import write_json_atomic

from . import codec, samples
from .manifest import games as _manifest_games
from .manifest import open_manifest, progress_bar
from .parallel import ordered_map

INDEX_VERSION = 1
INDEX_NAME = "index.json"
SPLITS = ("train", "val")


def manifest_fingerprint(manifest_path: str | Path) -> str:
    """What the shards depend on: games, kept seats, split, weights (not file paths or times)."""
    con = open_manifest(manifest_path)
    try:
        h = hashlib.sha256()
        for row in con.execute(
            "SELECT g.chrono, g.split, g.samples, src.weight, "
            "(SELECT GROUP_CONCAT(seat || ':' || samples) FROM seats s WHERE s.game = g.id AND s.kept = 1) "
            "FROM games g JOIN files f ON g.file = f.id JOIN sources src ON f.source = src.id ORDER BY g.chrono"
        ):
            h.update(repr(row).encode())
        return h.hexdigest()[:16]
    finally:
        con.close()


def read_index(out_dir: str | Path) -> dict:
    out_dir = Path(out_dir)
    p = out_dir / INDEX_NAME
    if not p.is_file():
        raise FileNotFoundError(
            f"{out_dir} holds no built corpus ({INDEX_NAME} missing; run `build`)"
        )
    index = json.loads(p.read_text())
    if index.get("version") != INDEX_VERSION:
        raise ValueError(
            f"{p}: index version {index.get('version')}, this code reads {INDEX_VERSION}; rebuild"
        )
    return index


def shard_paths(out_dir: str | Path, split: str) -> list[tuple[Path, int]]:
    """(path, samples) of every shard of ``split`` in build order."""
    index = read_index(out_dir)
    return [(Path(out_dir) / s["file"], int(s["samples"])) for s in index["shards"][split]]


def build(
    manifest_path: str | Path,
    out_dir: str | Path,
    *,
    shard_size: int = 16384,
    rules: dict | None = None,
    overwrite: bool = False,
    jobs: int = 1,
    progress: bool = True,
) -> dict:
    """Pack the kept samples; returns the index. An up-to-date corpus in ``out_dir`` is reused;
    one built from a different manifest is an error unless ``overwrite``.

    Shard k of a split holds its kept samples ``[k * shard_size, (k + 1) * shard_size)`` in
    chronological order, so ``jobs`` processes can each write a run of shards and the shards
    are the same whatever ``jobs`` is (a game cut by a shard boundary is replayed by both sides).
    """
    if shard_size < 1:
        raise ValueError(f"shard_size must be >= 1, got {shard_size}")
    out_dir = Path(out_dir)
    fingerprint = manifest_fingerprint(manifest_path)
    if (out_dir / INDEX_NAME).is_file():
        old = read_index(out_dir)
        if old["manifest_fingerprint"] == fingerprint and old["shard_size"] == shard_size:
            return old
        if not overwrite:
            raise FileExistsError(
                f"{out_dir} holds shards built from another manifest or shard size "
                f"(fingerprint {old['manifest_fingerprint']}, shard_size {old['shard_size']}; now "
                f"{fingerprint}, {shard_size}); pass overwrite=True (--overwrite) or another folder"
            )
        (out_dir / INDEX_NAME).unlink()
    for split in SPLITS:
        (out_dir / split).mkdir(parents=True, exist_ok=True)
        for old_shard in (out_dir / split).glob("*.mjs"):
            old_shard.unlink()
    con = open_manifest(manifest_path)
    (rules_json,) = con.execute("SELECT value FROM meta WHERE key='rules'").fetchone()
    con.close()
    rules = rules if rules is not None else json.loads(rules_json)
    entries = _manifest_games(manifest_path)
    t0 = time.perf_counter()
    tasks, totals = [], {}
    for split in SPLITS:
        pieces, start = [], 0
        for e in entries:
            if e.split == split and e.kept > 0:
                pieces.append((start, e))
                start += e.kept
        totals[split] = start
        n_shards = -(-start // shard_size)
        per_task = max(1, -(-n_shards // (4 * jobs)))
        for k0 in range(0, n_shards, per_task):
            k1 = min(k0 + per_task, n_shards)
            lo, hi = k0 * shard_size, min(k1 * shard_size, start)
            mine = [e for s, e in pieces if s < hi and s + e.kept > lo]
            first = next(s for s, e in pieces if s + e.kept > lo)
            tasks.append((split, k0, k1, shard_size, lo, hi, first, mine, str(out_dir), rules))
    made: dict[str, list[dict]] = {s: [] for s in SPLITS}
    n_total = sum(-(-n // shard_size) for n in totals.values())
    with progress_bar(progress, "build shards", n_total) as advance:
        for split, metas in ordered_map(_write_shards, tasks, jobs):
            made[split] += metas
            advance(len(metas))
    index = {
        "version": INDEX_VERSION,
        "format": f"MJSHARD1 zlib-{codec.ZLIB_LEVEL}; bits + codes/24 + float32 scalars (lossless)",
        "manifest": str(Path(manifest_path).resolve()),
        "manifest_fingerprint": fingerprint,
        "shard_size": shard_size,
        "rules": rules,
        "games": {s: sum(1 for e in entries if e.split == s) for s in SPLITS},
        "samples": {s: sum(x["samples"] for x in made[s]) for s in SPLITS},
        "bytes": {s: sum(x["bytes"] for x in made[s]) for s in SPLITS},
        "shards": made,
        "build_seconds": round(time.perf_counter() - t0, 3),
    }
    if index["samples"] != totals:
        raise RuntimeError(f"built {index['samples']} samples, the manifest keeps {totals}")
    write_json_atomic(out_dir / INDEX_NAME, index)
    return index


def _write_shards(task) -> tuple[str, list[dict]]:
    """Shards k0..k1-1 of a split: replay the games covering them, pack, write; in a worker."""
    split, k0, k1, size, lo, hi, first, games, out_dir, rules = task
    parts, pos = [], first  # pos: split offset of the next game's first kept sample
    by_file: dict[str, dict[int, object]] = {}
    for e in games:
        by_file.setdefault(e.file, {})[e.game] = e
    for path, wanted in by_file.items():
        for item in samples.log_games(path, rules=rules):
            if not isinstance(item, samples.GameSamples) or item.game not in wanted:
                continue
            e = wanted.pop(item.game)
            n = len(item.samples["action"])
            if n != e.samples:
                raise ValueError(
                    f"{path} game {e.game}: {n} samples now, {e.samples} when scanned; the log "
                    "changed since the scan (rescan it)"
                )
            keep = np.flatnonzero(np.isin(item.samples["seat"], e.kept_seats))
            a, b = max(lo - pos, 0), min(hi - pos, len(keep))
            rows = {k: v[keep[a:b]] for k, v in item.samples.items()}
            m = b - a
            parts.append(
                codec.pack(rows, np.full(m, e.id, np.int32), np.full(m, e.weight, np.float32))
            )
            pos += len(keep)
        if wanted:
            raise ValueError(
                f"{path}: game(s) {sorted(wanted)} were scanned but are no longer in the log (rescan it)"
            )
    allf = codec.concat(parts)
    metas = []
    for k in range(k0, k1):
        a, b = k * size - lo, min((k + 1) * size, hi) - lo
        name = f"{split}/shard_{k:05d}.mjs"
        nbytes = codec.write_shard(Path(out_dir) / name, {f: v[a:b] for f, v in allf.items()})
        metas.append({"file": name, "samples": b - a, "bytes": nbytes})
    return split, metas


def is_built(out_dir: str | Path) -> bool:
    return (Path(out_dir) / INDEX_NAME).is_file()


def remove_temp_files(out_dir: str | Path) -> int:
    """Delete leftovers of a crashed build (temporary names start with '.'); returns how many."""
    n = 0
    for p in Path(out_dir).rglob(".*.tmp-*"):
        os.unlink(p)
        n += 1
    return n
