"""The self-play -> Lightning bridge for AlphaZero.

One Lightning epoch is one iteration: iterating :class:`SelfPlayDataset` plays
``games_per_iteration`` games with the current best network through the game's
self-play engine (a native one: worker threads, batched evaluation queue), writes every position as a
sample (planes, visit-count policy, game result from the mover's view, legal mask) into
a TorchRL replay buffer, then yields ``train_steps`` minibatches sampled uniformly from
the buffer. A game symmetric under a left-right mirror whose actions are columns (one that
declares ``mirror_symmetric``) can store each sample twice (``augment_mirror``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import lightning as L
import numpy as np
import torch
from tensordict import TensorDict
from torch.utils.data import DataLoader, IterableDataset
from torchrl.data import LazyTensorStorage, ReplayBuffer
from torchrl.data.replay_buffers import RandomSampler

from meeple.phases.alphazero.evaluator import TorchEvaluator
from meeple.plugins.spec import AlphaZeroGame, SelfPlayEngine
from meeple.seeding import Component, PhaseSeeds, SeedStreams, reseed_rank
from meeple.tracking import keys

log = logging.getLogger(__name__)

SAMPLE_KEYS = ("planes", "policy", "value", "legal")


def samples_to_tensordict(out: dict[str, Any], mirror: bool) -> TensorDict:
    """Self-play output as a TensorDict, plus the mirrored positions if asked. Positions of fast
    searches (``full`` False, playout cap randomisation) are left out: their visit counts are
    too few to be a policy target."""
    td = TensorDict({k: torch.from_numpy(out[k]) for k in SAMPLE_KEYS}, batch_size=[len(out["value"])])
    full = out.get("full")
    if full is not None and not full.all():
        td = td[torch.from_numpy(full)]
    if not mirror:
        return td
    flipped = TensorDict(
        {
            "planes": td["planes"].flip(-1),   # columns reversed
            "policy": td["policy"].flip(-1),
            "value": td["value"],
            "legal": td["legal"].flip(-1),
        },
        batch_size=td.batch_size,
    )
    return torch.cat([td, flipped])


# Engine metrics logged every iteration (native name -> logged key).
ENGINE_METRICS = {
    "simulations_per_s": keys.SELFPLAY_SIMS_PER_S,
    "positions_per_s": keys.SELFPLAY_POSITIONS_PER_S,
    "games_per_h": keys.SELFPLAY_GAMES_PER_H,
    "mean_batch_size": "selfplay/mean_batch_size",
    "mean_fill_ratio": keys.SELFPLAY_FILL_RATIO,
    "queue_latency_p50_us": "selfplay/queue_latency_p50_us",
    "queue_latency_p99_us": "selfplay/queue_latency_p99_us",
    "evaluator_idle_fraction": keys.SELFPLAY_EVALUATOR_IDLE,
    "cache_hit_rate": "selfplay/cache_hit_rate",
    "collisions": "selfplay/collisions",
    "wall_s": "selfplay/wall_s",
    "actors": "selfplay/actors",  # collector=ray: the Ray actors that played the iteration
}


def replay_state(replay: ReplayBuffer) -> dict[str, Any]:
    """The buffer's filled rows in storage order plus its write cursor: plain tensors and ints
    (checkpoints load with ``weights_only=True``), and no unfilled capacity. Planes that are all
    whole numbers in 0..255 (occupancy planes are 0/1) are stored as uint8: 4x smaller, lossless."""
    n = len(replay)
    samples: dict[str, torch.Tensor] = {}
    planes_dtype = None
    if n:
        rows = replay.storage[:n]
        samples = {k: rows[k].clone() for k in SAMPLE_KEYS}
        planes = samples["planes"]
        planes_dtype = str(planes.dtype)
        if planes.is_floating_point() and bool(((planes == planes.round()) & (planes >= 0) & (planes <= 255)).all()):
            samples["planes"] = planes.to(torch.uint8)
    return {"samples": samples, "planes_dtype": planes_dtype,
            "writer": {k: int(v) for k, v in replay.writer.state_dict().items()}}


def load_replay_state(replay: ReplayBuffer, state: dict[str, Any]) -> None:
    """Writes the saved rows back at the same storage indices (so a seeded sampler draws the same
    samples) and restores the write cursor."""
    replay.empty()
    samples = dict(state["samples"])
    if samples:
        n = len(samples["value"])
        samples["planes"] = samples["planes"].to(getattr(torch, state["planes_dtype"].removeprefix("torch.")))
        replay.extend(TensorDict(samples, batch_size=[n]))
    replay.writer.load_state_dict(state["writer"])


class SelfPlayDataModule(SeedStreams, L.LightningDataModule):
    def __init__(
        self,
        *,
        game: AlphaZeroGame,
        seeds: PhaseSeeds,
        games_per_iteration: int,
        train_steps: int,
        batch_size: int,
        replay_size: int,
        min_replay: int,
        augment_mirror: bool,
        engine: dict[str, Any],
        engine_factory: Callable[..., SelfPlayEngine] | None = None,
        progress: bool = True,
    ) -> None:
        """``engine``: keyword options of ``game.selfplay_engine`` (a native engine's:
        workers, batch size, simulations, noise, temperature, ...); the evaluator and seed come
        from here. ``engine_factory(network, seed=..., **engine)``: an engine that plays elsewhere
        (``collector=ray``: :class:`meeple.phases.alphazero.ray_selfplay.RaySelfPlay`) instead of
        ``game.selfplay_engine`` in this process."""
        super().__init__()
        self.game = game
        self.seeds = seeds
        self.games_per_iteration = games_per_iteration
        self.train_steps = train_steps
        self.batch_size = batch_size
        self.min_replay = min_replay
        self.augment_mirror = augment_mirror
        self.engine_kwargs = dict(engine)
        self.engine_factory = engine_factory
        self.progress = progress
        self.generator = torch.Generator().manual_seed(seeds.seed(Component.DATA))
        self.replay = ReplayBuffer(
            storage=LazyTensorStorage(replay_size), sampler=RandomSampler(), batch_size=batch_size,
            generator=self.generator,
        )
        self.engine: SelfPlayEngine | None = None
        self.evaluator: TorchEvaluator | None = None
        self.network: Callable[[], torch.nn.Module] | None = None
        self.iteration = 0
        self.games = 0
        self.positions = 0
        self.next_game_id = 0  # restored into the engine when it starts (exact resume)
        self.stats: dict[str, float] = {}
        self.last_games: dict[str, Any] = {}

    def attach(self, network: Callable[[], torch.nn.Module]) -> None:
        """``network()`` returns the net that plays self-play now (the gate's current best)."""
        self.network = network

    def _start(self) -> None:
        net = self.network()
        if self.engine is None:
            # One engine for the whole run: game ids (and their random streams) keep counting.
            seed = self.seeds.seed(Component.ENV)
            if self.engine_factory is not None:  # reads network() itself at every run
                self.engine = self.engine_factory(self.network, seed=seed, **self.engine_kwargs)
            else:
                self.evaluator = TorchEvaluator(net, next(net.parameters()).device)
                buffers = self.evaluator.planes_buffers(int(self.engine_kwargs.get("batch_size", 16)),
                                                        self.game.planes_shape)
                self.engine = self.game.selfplay_engine(self.evaluator, seed=seed, planes_buffers=buffers,
                                                        **self.engine_kwargs)
            self.engine.next_game_id = self.next_game_id
        if self.evaluator is not None:
            self.evaluator.net = net

    def teardown(self, stage: str) -> None:
        if self.engine is not None:
            self.engine.close()
            self.engine = None
            self.evaluator = None

    def on_exception(self, exception: BaseException) -> None:
        self.teardown("fit")  # as RolloutDataModule.on_exception: no engine threads or Ray actors left behind

    # -- one iteration -----------------------------------------------------------
    def generate(self) -> None:
        """Play one iteration's games (repeating until the buffer holds ``min_replay`` samples)."""
        self._start()
        start = time.perf_counter()
        while True:
            out = self.engine.run(self.games_per_iteration)
            self.replay.extend(samples_to_tensordict(out, self.augment_mirror))
            self.games += len(out["moves"])
            self.positions += len(out["value"])
            self.next_game_id = self.engine.next_game_id
            if len(self.replay) >= self.min_replay or out["metrics"].get("stopped"):
                break
        self.iteration += 1
        metrics = out["metrics"]
        winners = np.asarray(out["winner"])
        self.last_games = {"moves": list(out["moves"]), "winner": winners}
        self.stats = {key: float(metrics[native]) for native, key in ENGINE_METRICS.items() if native in metrics}
        self.stats.update({
            "selfplay/games": float(self.games),
            "selfplay/positions": float(self.positions),
            "selfplay/replay_size": float(len(self.replay)),
            "selfplay/first_player_win_rate": float((winners == 0).mean()),
            "selfplay/draw_rate": float((winners == -1).mean()),
            "selfplay/mean_game_length": float(np.mean([len(m) for m in out["moves"]])),
            "perf/selfplay_s": time.perf_counter() - start,
        })
        log.info(
            "self-play iteration %d: %d games, %.0f positions/s, fill ratio %.2f, evaluator idle %.0f%%",
            self.iteration, len(out["moves"]), metrics.get("positions_per_s", 0.0),
            metrics.get("mean_fill_ratio", 0.0), 100 * metrics.get("evaluator_idle_fraction", 0.0),
        )

    def train_dataloader(self) -> DataLoader:
        return DataLoader(SelfPlayDataset(self), batch_size=None, collate_fn=lambda x: x)

    # -- checkpoint state ----------------------------------------------------------
    def reseed_rank(self) -> None:
        """A rank > 0 resuming: streams of its own instead of rank 0's (RolloutCheckpoint calls it)."""
        reseed_rank(self.seeds, self.generator, self.iteration)

    def state_dict(self) -> dict:
        # The replay buffer (tens of MB at the default size) and the next game's id are saved,
        # so a resumed run samples the same minibatches and plays the same games as an
        # uninterrupted one (exact with one self-play worker; with several, thread timing
        # changes the evaluation batches and so the floating-point results).
        return {"iteration": self.iteration, "games": self.games, "positions": self.positions,
                "generator": self.generator.get_state(), "next_game_id": self.next_game_id,
                "replay": replay_state(self.replay)}

    def load_state_dict(self, state: dict) -> None:
        self.iteration, self.games, self.positions = state["iteration"], state["games"], state["positions"]
        # Checkpoints written before the buffer was saved resume by refilling it by self-play.
        self.next_game_id = int(state.get("next_game_id", state["games"]))
        if "replay" in state:
            load_replay_state(self.replay, state["replay"])
        self.generator.set_state(state["generator"])
        if self.engine is not None:
            self.engine.next_game_id = self.next_game_id


class SelfPlayDataset(IterableDataset):
    """Each iteration: one round of self-play into the buffer, then ``train_steps`` minibatches."""

    def __init__(self, datamodule: SelfPlayDataModule) -> None:
        self.dm = datamodule

    def __len__(self) -> int:
        return self.dm.train_steps

    def __iter__(self) -> Iterator[TensorDict]:
        dm = self.dm
        dm.generate()
        device = next(dm.network().parameters()).device
        for _ in range(dm.train_steps):
            yield dm.replay.sample().to(device, non_blocking=True)
