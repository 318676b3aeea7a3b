"""``collector=ray`` for AlphaZero: the game's self-play engine in Ray actors (``collector.actors``).

Each actor builds the network from the model config and its own native engine with the run's
self-play seed. At every iteration the learner puts the playing network's weights in Ray's object
store once and gives each actor a contiguous range of game ids; a game's random stream derives
from the seed and its id (native/README.md, "Determinism"), so the games do not depend on how
many actors play them: the merged output, ordered by game id, is the output one in-process engine
with the same options would give (exactly so with one leaf in flight per game). A dead actor is
replaced by one with the same arguments and replays its range (:class:`RayActorPool`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from meeple.data.ray_pool import ActorProcess, RayActorPool
from meeple.phases.alphazero.evaluator import TorchEvaluator
from meeple.plugins.registry import load_game

DEFAULT_ACTORS = 2  # collector.actors: null

# Engine metrics that are counts over a run (summed over the actors); rates are recomputed from them.
SUMMED_METRICS = ("games", "positions", "simulations", "evaluations", "batches", "evaluator_s", "cache_lookups",
                  "cache_hits", "collisions", "terminal_leaves")
MEAN_METRICS = ("evaluator_idle_fraction", "evaluator_wait_fraction")
WORST_METRICS = ("queue_latency_p50_us", "queue_latency_p99_us")


class _SelfPlayActor(ActorProcess):
    """Runs in a Ray worker process: one network copy on the CPU, one self-play engine."""

    def __init__(self, game_name: str, net_builder: Callable[..., nn.Module], seed: int, engine_kwargs: dict,
                 torch_threads: int) -> None:
        torch.set_num_threads(torch_threads)
        game = load_game(game_name)
        self.net = net_builder(game.planes_shape, game.num_actions).eval()
        evaluator = TorchEvaluator(self.net, "cpu")
        buffers = evaluator.planes_buffers(int(engine_kwargs.get("batch_size", 16)), game.planes_shape)
        self.engine = game.selfplay_engine(evaluator, seed=seed, planes_buffers=buffers, **engine_kwargs)

    def play(self, weights: dict[str, torch.Tensor], first_game_id: int, games: int) -> dict[str, Any] | None:
        if games == 0:
            return None
        self.net.load_state_dict(weights)
        self.engine.next_game_id = first_game_id
        return self.engine.run(games)

    def close(self) -> None:
        self.engine.close()


def split_games(games: int, actors: int) -> list[int]:
    """``games`` over ``actors`` as evenly as possible, the first actors taking the remainder."""
    base, extra = divmod(games, actors)
    return [base + (i < extra) for i in range(actors)]


def merge_runs(outs: list[dict[str, Any]], wall_s: float) -> dict[str, Any]:
    """The actors' outputs (in game-id order) as one engine run's: every per-position and per-game
    output concatenated (``game``, the index of a position's game within the run, offset per
    actor), count metrics summed, rates recomputed over the wall time of the whole round, shares
    averaged, queue latencies the worst actor's; other metrics (the engine's settings) are the
    first actor's. Metrics an engine does not report stay out."""
    merged: dict[str, Any] = {}
    games = [len(out["winner"]) for out in outs]
    for key, first in outs[0].items():
        if key == "metrics":
            continue
        parts = [out[key] for out in outs]
        if key == "game":  # positions' game index within each actor's run
            parts = [part + sum(games[:i]) for i, part in enumerate(parts)]
        merged[key] = [x for part in parts for x in part] if isinstance(first, list) else np.concatenate(parts)
    each = [out["metrics"] for out in outs]
    metrics: dict[str, Any] = dict(each[0])
    metrics.update({key: sum(m[key] for m in each) for key in SUMMED_METRICS if all(key in m for m in each)})
    metrics.update({key: float(np.mean([m[key] for m in each])) for key in MEAN_METRICS if all(key in m for m in each)})
    metrics.update({key: max(m[key] for m in each) for key in WORST_METRICS if all(key in m for m in each)})
    if all("batch_size_hist" in m for m in each):
        metrics["batch_size_hist"] = np.sum([np.asarray(m["batch_size_hist"]) for m in each], axis=0).tolist()
    metrics.update(wall_s=wall_s, actors=len(outs), stopped=any(m.get("stopped", False) for m in each))
    rates = {"simulations_per_s": ("simulations", 1), "positions_per_s": ("positions", 1), "games_per_h": ("games", 3600)}
    for rate, (count, scale) in rates.items():
        if count in metrics:
            metrics[rate] = scale * metrics[count] / wall_s
    if "evaluations" in metrics and "batches" in metrics:
        metrics["mean_batch_size"] = metrics["evaluations"] / max(metrics["batches"], 1)
        if "batch_size" in metrics:
            metrics["mean_fill_ratio"] = metrics["mean_batch_size"] / metrics["batch_size"]
    if "cache_hits" in metrics and "cache_lookups" in metrics:
        metrics["cache_hit_rate"] = metrics["cache_hits"] / max(metrics["cache_lookups"], 1)
    merged["metrics"] = metrics
    return merged


class RaySelfPlay:
    """A :class:`meeple.plugins.spec.SelfPlayEngine` whose games are played by Ray actors."""

    def __init__(self, network: Callable[[], nn.Module], *, game: str, net_builder: Callable[..., nn.Module],
                 seed: int, actors: int, address: str | None = None, cpus_per_actor: float = 1.0,
                 **engine_kwargs: Any) -> None:
        """``network()``: the net whose weights play the next run (the gate's current best);
        ``net_builder(planes_shape, num_actions)``: an uninitialised copy of it, built in each actor,
        whose forwards use the actor's CPUs (``cpus_per_actor`` torch threads, at least 1)."""
        self.network = network
        self.next_game_id = 0
        self.torch_threads = max(1, int(cpus_per_actor))
        args = (game, net_builder, seed, engine_kwargs, self.torch_threads)
        # A replacement has the same arguments: it replays the dead actor's game ids exactly.
        self.pool = RayActorPool(_SelfPlayActor, [args] * actors, what="collector=ray (self-play)", address=address,
                                 cpus_per_actor=cpus_per_actor, restart_args=lambda _index, _restarts: args)

    def run(self, games: int) -> dict[str, Any]:
        if games < 1:
            raise ValueError(f"RaySelfPlay.run({games}); accepted: games >= 1")
        shares = split_games(games, len(self.pool))
        firsts = self.next_game_id + np.cumsum([0] + shares[:-1])
        weights = self.pool.put({k: v.detach().cpu() for k, v in self.network().state_dict().items()})
        start = time.perf_counter()
        outs = self.pool.call("play", [(weights, int(first), n) for first, n in zip(firsts, shares, strict=True)])
        wall_s = time.perf_counter() - start
        self.next_game_id += games
        return merge_runs([out for out in outs if out is not None], wall_s)

    def actor_pids(self) -> list[int]:
        return self.pool.pids()

    @property
    def restarts(self) -> int:
        return self.pool.restarts

    def close(self) -> None:
        self.pool.shutdown()
