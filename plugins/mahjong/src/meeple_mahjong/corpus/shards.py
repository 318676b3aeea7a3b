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

from . import codec
from .manifest import _bar, games_by_file, open_manifest

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
    progress: bool = True,
) -> dict:
    """Pack the kept samples; returns the index. An up-to-date corpus in ``out_dir`` is reused;
    one built from a different manifest is an error unless ``overwrite``."""
    from .samples import GameSamples, log_games

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
    by_file = games_by_file(manifest_path)
    pending: dict[str, list[dict]] = {s: [] for s in SPLITS}
    counts = {s: 0 for s in SPLITS}
    shards: dict[str, list[dict]] = {s: [] for s in SPLITS}
    games_in = {s: 0 for s in SPLITS}
    t0 = time.perf_counter()

    def flush(split: str, final: bool) -> None:
        while counts[split] >= shard_size or (final and counts[split] > 0):
            allf = codec.concat(pending[split])
            take = min(shard_size, counts[split])
            head = {k: v[:take] for k, v in allf.items()}
            rest = {k: v[take:] for k, v in allf.items()}
            name = f"{split}/shard_{len(shards[split]):05d}.mjs"
            size = codec.write_shard(out_dir / name, head)
            shards[split].append({"file": name, "samples": take, "bytes": size})
            pending[split] = [rest] if len(rest["action"]) else []
            counts[split] -= take

    with _bar(progress, "build shards", len(by_file)) as advance:
        for path, entries in by_file.items():
            wanted = {e.game: e for e in entries}
            for item in log_games(path, rules=rules):
                if not isinstance(item, GameSamples) or item.game not in wanted:
                    continue
                e = wanted.pop(item.game)
                n = len(item.samples["action"])
                if n != e.samples:
                    raise ValueError(
                        f"{path} game {e.game}: {n} samples now, {e.samples} when scanned; the log "
                        "changed since the scan (rescan it)"
                    )
                keep = np.isin(item.samples["seat"], e.kept_seats)
                games_in[e.split] += 1
                if not keep.any():
                    continue
                rows = {k: v[keep] for k, v in item.samples.items()}
                m = int(keep.sum())
                pending[e.split].append(
                    codec.pack(rows, np.full(m, e.id, np.int32), np.full(m, e.weight, np.float32))
                )
                counts[e.split] += m
                flush(e.split, final=False)
            if wanted:
                missing = sorted(wanted)
                raise ValueError(
                    f"{path}: game(s) {missing} were scanned but are no longer in the log (rescan it)"
                )
            advance()
    for split in SPLITS:
        flush(split, final=True)
    index = {
        "version": INDEX_VERSION,
        "format": f"MJSHARD1 zlib-{codec.ZLIB_LEVEL}; bits + codes/24 + float32 scalars (lossless)",
        "manifest": str(Path(manifest_path).resolve()),
        "manifest_fingerprint": fingerprint,
        "shard_size": shard_size,
        "rules": rules,
        "games": games_in,
        "samples": {s: sum(x["samples"] for x in shards[s]) for s in SPLITS},
        "bytes": {s: sum(x["bytes"] for x in shards[s]) for s in SPLITS},
        "shards": shards,
        "build_seconds": round(time.perf_counter() - t0, 3),
    }
    write_json_atomic(out_dir / INDEX_NAME, index)
    return index


def is_built(out_dir: str | Path) -> bool:
    return (Path(out_dir) / INDEX_NAME).is_file()


def remove_temp_files(out_dir: str | Path) -> int:
    """Delete leftovers of a crashed build (temporary names start with '.'); returns how many."""
    n = 0
    for p in Path(out_dir).rglob(".*.tmp-*"):
        os.unlink(p)
        n += 1
    return n
