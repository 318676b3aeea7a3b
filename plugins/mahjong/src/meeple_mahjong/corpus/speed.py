"""Corpus speed, for `python -m meeple.bench mahjong`: training samples per CPU second of one core.

- ``raw``: MJAI logs -> batches: ``log_games`` (parse, replay through the engine, encode every
  decision) and the batch tensors (float32 planes, bool mask, targets), as a loader reading
  logs directly would do;
- ``shards``: built shards -> batches: ``ShardDataset`` (decompress, shuffle buffer, suit
  permutation, decode to float32) in the calling process.
The logs are rule-bot self-play games written first (not timed); rates use process CPU time with torch
at one thread, so they are per core and little disturbed by other jobs on the machine.
"""

from __future__ import annotations

import contextlib
import io
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from . import manifest, shards
from .loader import ACTION_CATEGORY, DEFAULT_RANK_POINTS, ShardDataset
from .samples import GameSamples, log_games

RAW_GOAL, SHARDS_GOAL = 20_000, 200_000  # samples/s/core (issue 16)


def _raw_batches(logs: list[Path], batch_size: int) -> int:
    points = np.asarray(DEFAULT_RANK_POINTS, np.float32)
    n = 0
    for f in logs:
        for g in log_games(f):
            if not isinstance(g, GameSamples):
                continue
            s = g.samples
            for a in range(0, len(s["action"]), batch_size):
                sl = slice(a, a + batch_size)
                action = s["action"][sl].astype(np.int64)
                rank = s["rank"][sl].astype(np.int64)
                batch = {"observation": torch.from_numpy(s["obs"][sl]), "action_mask": torch.from_numpy(s["mask"][sl]),
                         "action": torch.from_numpy(action), "return": torch.from_numpy(points[rank]),
                         "rank": torch.from_numpy(rank), "tenpai": torch.from_numpy(s["tenpai"][sl].astype(np.float32)),
                         "danger": torch.from_numpy(s["danger"][sl].astype(np.float32)),
                         "category": torch.from_numpy(ACTION_CATEGORY[action])}  # fmt: skip
                n += len(batch["action"])
    return n


def corpus_rates(games: int = 20, seed: int = 0, policy: str = "rule", batch_size: int = 1024,
                 epochs: int = 3) -> dict[str, Any]:  # fmt: skip
    from ..selfplay import main as selfplay_main

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with tempfile.TemporaryDirectory(prefix="meeple-corpus-bench-") as tmp:
            logs = Path(tmp) / "logs"
            with contextlib.redirect_stdout(io.StringIO()):
                args = ["--games", games, "--seed", seed, "--out", logs, "--policy", policy]
                selfplay_main([str(x) for x in args])
            files = sorted(logs.glob("*.mjson"))
            c0 = time.process_time()
            raw = _raw_batches(files, batch_size)
            raw_cpu = time.process_time() - c0
            m = Path(tmp) / "manifest.sqlite"
            manifest.scan([str(logs)], m, val_fraction=0.0, filters=None, progress=False)
            index = shards.build(m, Path(tmp) / "shards", progress=False)
            ds = ShardDataset(
                shards.shard_paths(Path(tmp) / "shards", "train"), batch_size=batch_size
            )
            c0 = time.process_time()
            got = sum(len(b["action"]) for e in range(epochs) for b in ds.iter_role(e, 0, 0, 1))
            shard_cpu = time.process_time() - c0
    finally:
        torch.set_num_threads(threads)
    n = index["samples"]["train"]
    return {
        "games": games, "policy": policy, "samples": n, "batch_size": batch_size,
        "bytes_per_sample": round(index["bytes"]["train"] / max(n, 1), 1),
        "raw_cpu_s": round(raw_cpu, 4), "raw_samples_per_s": round(raw / raw_cpu, 1),
        "shards_cpu_s": round(shard_cpu, 4), "shards_samples_per_s": round(got / shard_cpu, 1),
    }  # fmt: skip
