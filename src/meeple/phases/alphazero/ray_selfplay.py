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

# Per-position and per-game outputs of a SelfPlayEngine run (meeple.plugins.spec.SelfPlayEngine).
POSITION_KEYS = ("planes", "policy", "value", "legal", "game", "ply", "full")
GAME_KEYS = ("game_id", "winner")
SUMMED_METRICS = ("games", "positions", "simulations", "evaluations", "batches", "evaluator_s", "cache_lookups",
                  "cache_hits", "collisions", "terminal_leaves")


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
    """The actors' outputs (in game-id order) as one engine run's: positions and games concatenated
    (``game``, the index of a position's game within the run, offset per actor), counts summed and
    rates recomputed over the wall time of the whole round. Queue latencies are the worst actor's."""
    merged: dict[str, Any] = {}
    offsets = np.cumsum([0] + [len(out["winner"]) for out in outs[:-1]])
    for key in POSITION_KEYS:
        if key in outs[0]:
            parts = [out[key] + offset if key == "game" else out[key] for out, offset in zip(outs, offsets, strict=True)]
            merged[key] = np.concatenate(parts)
    for key in GAME_KEYS:
        merged[key] = np.concatenate([out[key] for out in outs])
    merged["moves"] = [moves for out in outs for moves in out["moves"]]
    each = [out["metrics"] for out in outs]
    metrics: dict[str, Any] = {key: sum(m[key] for m in each) for key in SUMMED_METRICS if key in each[0]}
    metrics.update(wall_s=wall_s, actors=len(outs), stopped=any(m.get("stopped", False) for m in each),
                   simulations_per_s=metrics["simulations"] / wall_s, positions_per_s=metrics["positions"] / wall_s,
                   games_per_h=3600 * metrics["games"] / wall_s,
                   mean_batch_size=metrics["evaluations"] / max(metrics["batches"], 1),
                   cache_hit_rate=metrics["cache_hits"] / max(metrics["cache_lookups"], 1),
                   evaluator_idle_fraction=float(np.mean([m["evaluator_idle_fraction"] for m in each])),
                   queue_latency_p50_us=max(m["queue_latency_p50_us"] for m in each),
                   queue_latency_p99_us=max(m["queue_latency_p99_us"] for m in each))
    metrics["mean_fill_ratio"] = metrics["mean_batch_size"] / each[0]["batch_size"]
    merged["metrics"] = metrics
    return merged


class RaySelfPlay:
    """A :class:`meeple.plugins.spec.SelfPlayEngine` whose games are played by Ray actors."""

    def __init__(self, network: Callable[[], nn.Module], *, game: str, net_builder: Callable[..., nn.Module],
                 seed: int, actors: int, address: str | None = None, cpus_per_actor: float = 1.0,
                 torch_threads: int = 1, **engine_kwargs: Any) -> None:
        """``network()``: the net whose weights play the next run (the gate's current best);
        ``net_builder(planes_shape, num_actions)``: an uninitialised copy of it, built in each actor."""
        self.network = network
        self.next_game_id = 0
        args = (game, net_builder, seed, engine_kwargs, torch_threads)
        # A replacement has the same arguments: it replays the dead actor's game ids exactly.
        self.pool = RayActorPool(_SelfPlayActor, [args] * actors, what="collector=ray (self-play)", address=address,
                                 cpus_per_actor=cpus_per_actor, restart_args=lambda _index, _restarts: args)

    def run(self, games: int) -> dict[str, Any]:
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
