"""The corpus as a Lightning DataModule for behavioral cloning, and building it on first use.

    dm = CorpusDataModule("outputs/corpus/rule", batch_size=2048, num_workers=8,
                          selfplay={"games": 2000, "seed": 0, "policy": "rule"})

``corpus_dir`` holds ``logs/`` (self-play only), ``manifest.sqlite`` and ``shards/``. With
``selfplay`` set and no corpus there yet, :func:`prepare_corpus` plays the games
(``python -m meeple_mahjong.selfplay``), scans and builds; ``corpus.json`` records what was
asked, so a later run with the same request reuses the corpus and one with another request
stops with an error instead of silently training on other data. Without ``selfplay`` the
folder must already hold a built corpus (``python -m meeple_mahjong.corpus scan/build``).

What the BC module reads: ``steps_per_epoch`` (its LR schedule), ``frames`` (training samples
taken by steps so far). ``state_dict`` carries the loader's position (see ``loader``) so a run
resumed from a checkpoint takes exactly the batches an uninterrupted run would have taken.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightning as L

from meeple.jsonio import write_json_atomic

from . import manifest as _manifest
from . import shards as _shards
from .loader import DEFAULT_RANK_POINTS, CorpusLoader, ShardDataset

REQUEST_FILE = "corpus.json"
log = logging.getLogger(__name__)


def prepare_corpus(
    corpus_dir: str | Path,
    *,
    selfplay: dict | None = None,
    val_fraction: float = 0.1,
    filters: dict | None = None,
    shard_size: int = 16384,
    jobs: int = 1,
    progress: bool = True,
) -> Path:
    """The built corpus in ``corpus_dir`` (its shards folder), made from self-play if asked.

    ``selfplay``: ``{"games": N, "seed": S, "policy": "rule", "args": [...]}`` (``args``: more
    ``meeple_mahjong.selfplay`` flags, e.g. ``["--east-only"]``). ``filters``: a
    ``manifest.PlayerFilter`` dict, ``None`` = keep every seat (a self-play corpus has the same
    bot in all seats).
    """
    corpus_dir = Path(corpus_dir)
    out = corpus_dir / "shards"
    if selfplay is None:
        _shards.read_index(out)  # clear error when nothing is built there
        return out
    unknown = set(selfplay) - {"games", "seed", "policy", "args"}
    if unknown or "games" not in selfplay:
        raise ValueError(
            f"selfplay source {selfplay}: needs 'games' and accepts 'seed', 'policy', 'args' "
            f"(unknown: {sorted(unknown)})"
        )
    request = {
        "selfplay": {"games": int(selfplay["games"]), "seed": int(selfplay.get("seed", 0)),
                     "policy": str(selfplay.get("policy", "rule")),
                     "args": [str(a) for a in selfplay.get("args", [])]},
        "val_fraction": val_fraction,
        "filters": filters,
        "shard_size": shard_size,
    }  # fmt: skip
    req_path = corpus_dir / REQUEST_FILE
    if req_path.is_file():
        old = json.loads(req_path.read_text())
        if old != request:
            raise ValueError(
                f"{corpus_dir} holds a corpus built for {old}, not for {request}; point corpus_dir "
                "elsewhere or delete that folder"
            )
        if _shards.is_built(out):
            return out
    elif corpus_dir.exists() and any(corpus_dir.iterdir()):
        raise ValueError(
            f"{corpus_dir} is not empty and has no {REQUEST_FILE}; it is not a corpus folder this can reuse"
        )
    write_json_atomic(req_path, request)
    logs = corpus_dir / "logs"
    sp = request["selfplay"]
    summary = logs / "summary.json"
    if not (summary.is_file() and json.loads(summary.read_text()).get("games") == sp["games"]):
        from ..selfplay import main as selfplay_main

        args = [
            "--games",
            sp["games"],
            "--seed",
            sp["seed"],
            "--out",
            logs,
            "--policy",
            sp["policy"],
        ]
        with contextlib.redirect_stdout(io.StringIO()) as printed:  # its one-line JSON summary
            rc = selfplay_main([str(a) for a in args + sp["args"]])
        log.info("self-play corpus: %s", printed.getvalue().strip())
        if rc:
            raise RuntimeError(f"self-play into {logs} failed (exit status {rc})")
    m = corpus_dir / "manifest.sqlite"
    rules = json.loads(summary.read_text())["rules"]  # e.g. east_only from --east-only
    _manifest.scan(
        [str(logs)],
        m,
        val_fraction=val_fraction,
        filters=filters,
        rules=rules,
        jobs=jobs,
        progress=progress,
    )
    _shards.build(m, out, shard_size=shard_size, overwrite=True, jobs=jobs, progress=progress)
    return out


class CorpusDataModule(L.LightningDataModule):
    def __init__(
        self,
        corpus_dir: str | Path,
        *,
        batch_size: int = 2048,
        val_batch_size: int | None = None,
        num_workers: int = 0,
        pin_memory: bool = False,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        buffer_size: int = 65536,
        reserve_fraction: float = 0.25,
        augment: bool = True,
        seed: int = 0,
        rank_points: Sequence[float] = DEFAULT_RANK_POINTS,
        selfplay: dict | None = None,
        val_fraction: float = 0.1,
        filters: dict | None = None,
        shard_size: int = 16384,
        build_jobs: int = 1,
    ) -> None:
        super().__init__()
        self.corpus_dir = Path(corpus_dir)
        self.batch_size = batch_size
        self.val_batch_size = val_batch_size or batch_size
        self.loader_kw = dict(num_workers=num_workers, pin_memory=pin_memory,
                              prefetch_factor=prefetch_factor, persistent_workers=persistent_workers)  # fmt: skip
        self.shuffle_kw = dict(buffer_size=buffer_size, reserve_fraction=reserve_fraction,
                               augment=augment, seed=seed, rank_points=rank_points)  # fmt: skip
        self.prepare_kw = dict(selfplay=selfplay, val_fraction=val_fraction, filters=filters,
                               shard_size=shard_size)  # fmt: skip
        self.build_jobs = build_jobs  # processes replaying logs for scan and build
        self._pending_state: dict | None = None
        self.frames = 0  # training samples taken by steps so far
        self._opened = False

    def prepare_data(self) -> None:
        """Builds the corpus when asked and missing (Lightning runs this on one process per node)."""
        prepare_corpus(self.corpus_dir, jobs=self.build_jobs, progress=True, **self.prepare_kw)

    def setup(self, stage: str | None = None) -> None:
        self._open()

    def _open(self) -> None:
        if self._opened:
            return
        self.shards_dir = prepare_corpus(self.corpus_dir, progress=False, **self.prepare_kw)
        self.index = _shards.read_index(self.shards_dir)
        self.train_set = ShardDataset(_shards.shard_paths(self.shards_dir, "train"),
                                      batch_size=self.batch_size, shuffle=True, **self.shuffle_kw)  # fmt: skip
        val_kw = {**self.shuffle_kw, "augment": False}
        self.val_set = ShardDataset(_shards.shard_paths(self.shards_dir, "val"),
                                    batch_size=self.val_batch_size, shuffle=False, **val_kw)  # fmt: skip
        self.train_loader = CorpusLoader(self.train_set, track=False, **self.loader_kw)
        self._opened = True
        if self._pending_state is not None:
            self.load_state_dict(self._pending_state)

    @property
    def steps_per_epoch(self) -> int:
        self._open()
        return len(self.train_loader)

    def train_dataloader(self) -> CorpusLoader:
        self._open()
        return self.train_loader

    def val_dataloader(self) -> CorpusLoader | list:
        self._open()
        if self.val_set.samples == 0:
            return []
        return CorpusLoader(self.val_set, **self.loader_kw)

    def on_before_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        """Counts the position when a training step takes the batch (after Lightning's prefetch)."""
        trainer = getattr(self, "trainer", None)
        if "_pos" in batch and trainer is not None and trainer.training:
            self.train_loader.advance(batch)
            self.frames += len(batch["action"])
        batch.pop("_pos", None)
        from tensordict import TensorDict

        return TensorDict(batch, batch_size=[len(batch["action"])])

    def state_dict(self) -> dict:
        self._open()
        return {"loader": self.train_loader.state_dict(), "frames": self.frames,
                "manifest_fingerprint": self.index["manifest_fingerprint"]}  # fmt: skip

    def load_state_dict(self, state: dict) -> None:
        if not self._opened:  # Lightning may restore before setup: applied when opened
            self._pending_state = state
            return
        self._pending_state = None
        if state["manifest_fingerprint"] != self.index["manifest_fingerprint"]:
            from meeple.checkpoint.io import CheckpointError

            raise CheckpointError(
                f"the checkpoint was trained on corpus {state['manifest_fingerprint']}; "
                f"{self.shards_dir} holds corpus {self.index['manifest_fingerprint']}; accepted: the same corpus"
            )
        self.train_loader.load_state_dict(state["loader"])
        self.frames = state["frames"]
