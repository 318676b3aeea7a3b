"""Mahjong league throughput: learner decisions/s and games/hour of ``env.league=true`` next to
the batch simulator's raw rate (issue #20).

    python -m meeple.bench league --out league.json [--tables 32] [--decisions 4096]
    python -m meeple.bench league --scale large --device cuda --tables 512 --sim-threads 8

(entry point ``meeple.benchmarks: league`` in this plugin's pyproject.toml)

Rows, one after the other in one process, each over the same number of learner decisions,
``--tables`` tables, one learner seat per table, the standard East-South rules:

- ``sim-rule-bots``: the batch simulator alone (``BatchSim``), rule bots in the other three
  seats, the learner a random legal action drawn in numpy: the simulator's raw rate;
- ``env-rule-bots``: the same play through the TorchRL env (``MahjongEnv``, opponents rule),
  the learner random (``random_policy``): what the env's tensors and TensorDicts cost;
- ``league-self``: ``LeagueEnv`` with one network (``mahjong_resnet`` of ``--scale``'s size,
  small 6 x 64 or large 40 x 256; ``--blocks`` / ``--channels`` override) on ``--device``, in the
  three other seats of every table (``sampled_policy``), the learner playing it too (one batched
  forward per env step, ``--learner sampled|greedy``);
- ``league-pool{N}``: the same with ``--pool`` N different networks (differently seeded), each
  table seating three of them: one forward per seated network per simulator step, as a
  league's pool costs (``--pool 0`` leaves the row out).

Per row: learner decisions/s, all decisions/s (every seat: ``BatchSim.decisions``), games
finished in the run and games/hour (extrapolated from them: with few games finished it is
rough; raise ``--decisions``), network forwards per env step (learner's included), per CPU
second of the process and per wall second. The networks are untrained, so their games are
not a trained league's length; the rates per decision are what carries over.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import meeple_mahjong as mj
from meeple.bench import check_device
from meeple.jsonio import write_json_atomic
from meeple.provenance import git_state

from .bench import _rates, _run, sim_buffers

SCALES = Path(__file__).parent / "conf" / "mahjong_scales" / "default.yaml"
BASE = "sim-rule-bots"  # the row every ratio divides by


def scale_network(scale: str = "small") -> dict[str, int]:
    """A scale's network (small: hardware=cpu, large: the GPU profiles), read from the scales
    file so it cannot drift from what training builds; ``--blocks`` and ``--channels`` override
    two of it."""
    from omegaconf import OmegaConf

    sizes = OmegaConf.load(SCALES)[scale]
    return {k: int(sizes[k]) for k in ("blocks", "channels", "groups", "hidden")}


def _timed(step: Callable[[], tuple[int, int]], decisions: int, all_decisions: Callable[[], int]
           ) -> dict[str, Any]:  # fmt: skip
    """Calls ``step() -> (learner decisions, games finished)`` until ``decisions`` are made."""
    made = games = steps = 0
    all0 = all_decisions()
    t0, c0 = time.perf_counter(), time.process_time()
    while made < decisions:
        d, g = step()
        made, games, steps = made + d, games + g, steps + 1
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    every = all_decisions() - all0
    return {**_rates(games, made, wall, cpu, "games"), "steps": steps,
            "decisions_per_s_wall": round(made / wall, 1), "all_decisions": every,
            "all_decisions_per_s": round(every / cpu, 1),
            "all_decisions_per_s_wall": round(every / wall, 1)}  # fmt: skip


def _sim_rule_bots(tables: int, decisions: int, seed: int, threads: int) -> dict[str, Any]:
    sim = mj.BatchSim(tables, mj.Game(), session_seed=seed, learner_seats=[0], bots=["rule"] * 4,
                      threads=threads)  # fmt: skip
    out = sim_buffers(sim.num_slots)
    sim.reset(None, **out)
    rng = np.random.default_rng(seed)

    def step() -> tuple[int, int]:
        made, before = int(out["active"].sum()), sim.games_finished
        pick = (rng.random(out["mask"].shape) * out["mask"]).argmax(1)  # a random legal index
        sim.step(pick, **out)
        if out["done"].any():
            sim.reset(out["done"], **out)  # one slot per table: done per slot is done per table
        return made, sim.games_finished - before

    return {"tables": tables, **_timed(step, decisions, lambda: sim.decisions)}


def _env_loop(env: Any, learner: Callable, decisions: int, finished: Callable[[Any], int]
              ) -> dict[str, Any]:  # fmt: skip
    """The learner's loop over a TorchRL mahjong env: one ``learner`` call per env step on every
    table's observation, done tables reset; ``finished(td)`` counts the games that ended."""
    state = {"td": env.reset()}
    learner(state["td"]["observation"], state["td"]["action_mask"])  # warm-up: first-call costs
    forwards0, sim_steps0 = env.forwards, env.sim_steps

    def step() -> tuple[int, int]:
        td = state["td"]
        made = int(td["active"].sum())
        td["action"] = learner(td["observation"], td["action_mask"])
        td = env.step(td)["next"]
        games = finished(td)
        if td["done"].any():
            td["_reset"] = td["done"].clone()
            td = env.reset(td)
        state["td"] = td
        return made, games

    row = _timed(step, decisions, lambda: env.sim.decisions)
    # Forwards per env step: the learner's one plus each seated network's (one per simulator
    # step it acts in: the env steps tables waiting on networks alone, several per env step).
    row["network_forwards"] = {n: f - forwards0[n] for n, f in env.forwards.items()}
    row["forwards_per_step"] = round(1 + sum(row["network_forwards"].values()) / row["steps"], 3)
    row["sim_steps_per_step"] = round((env.sim_steps - sim_steps0) / row["steps"], 3)
    return row


def _env_rule_bots(tables: int, decisions: int, seed: int, threads: int) -> dict[str, Any]:
    from meeple.nets.policy_fn import random_policy
    from meeple_mahjong.env import backend

    env = backend.make_env({"opponents": "rule", "threads": threads}, num_envs=tables)
    env.set_seed(seed)
    row = _env_loop(env, random_policy(seed), decisions, lambda td: int(td["done"].sum()))
    row["forwards_per_step"] = 0.0  # the learner is random: no network
    return {"tables": tables, **row}


def _actor(env: Any, net: dict[str, int], seed: int, device: str) -> Any:
    import torch

    from meeple_mahjong.net import build_mahjong_actor_critic

    torch.manual_seed(seed)  # the network's initial weights
    actor, _ = build_mahjong_actor_critic(env.observation_spec, env.action_spec, **net)
    return actor.to(device)


def _league(tables: int, decisions: int, seed: int, threads: int, net: dict[str, int], networks: int,
            learner: str, device: str) -> dict[str, Any]:  # fmt: skip
    """``networks`` distinct networks seated three per table by rotation; the learner plays
    the first with its own policy fn."""
    from meeple.nets.policy_fn import greedy_policy, sampled_policy
    from meeple_mahjong.env import backend

    env = backend.make_env({"league": True, "threads": threads}, num_envs=tables)
    actors = [_actor(env, net, seed + i, device) for i in range(networks)]
    names = [f"net{i}" for i in range(networks)]
    policies = {n: sampled_policy(a, seed=seed + 100 + i)
                for i, (n, a) in enumerate(zip(names, actors))}  # fmt: skip

    def seat(table: int, game: int) -> list[str]:  # rotates the pool over the tables and games
        return [names[(table + game + i) % networks] for i in range(env.league_seats)]

    env.set_league(policies, seat)
    env.set_seed(seed)
    act = greedy_policy(actors[0]) if learner == "greedy" else sampled_policy(actors[0], seed=seed)
    row = _env_loop(env, act, decisions, lambda td: len(env.pop_results()))
    params = sum(p.numel() for p in actors[0].parameters())
    return {"tables": tables, "networks": networks, "parameters": params, "device": device, **row}


def main(argv: list[str] | None = None) -> int:
    """mahjong league throughput: learner decisions/s and games/hour vs the batch simulator's raw rate"""
    p = argparse.ArgumentParser(
        prog="python -m meeple.bench league", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--out", type=Path, default=Path("league.json"), help="JSON results file")
    p.add_argument("--tables", type=int, default=32, help="tables (one learner slot each)")
    p.add_argument("--decisions", type=int, default=4096, help="learner decisions per row")
    p.add_argument("--scale", choices=("small", "large"), default="small",
                   help="the network of this hardware.model_scale (small 6 x 64, large 40 x 256)")  # fmt: skip
    p.add_argument("--blocks", type=int, default=None, help="network residual blocks (default: --scale's)")
    p.add_argument("--channels", type=int, default=None,
                   help="network channels, a multiple of GroupNorm's groups (default: --scale's)")  # fmt: skip
    p.add_argument("--device", default="cpu", help="where the networks run (cpu, cuda)")
    p.add_argument("--sim-threads", type=int, default=1, help="simulator threads (tables step in parallel)")
    p.add_argument("--pool", type=int, default=3,
                   help="distinct networks of the pool row (0: no pool row)")  # fmt: skip
    p.add_argument("--learner", choices=("sampled", "greedy"), default="sampled",
                   help="the learner's action from the network's logits")  # fmt: skip
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    for flag in ("tables", "decisions", "blocks", "channels", "threads", "sim_threads"):
        if getattr(a, flag) is not None and getattr(a, flag) < 1:
            p.error(f"--{flag.replace('_', '-')} must be >= 1")
    if a.pool < 0:
        p.error("--pool must be >= 0")
    net = scale_network(a.scale)
    net.update({k: v for k, v in (("blocks", a.blocks), ("channels", a.channels)) if v is not None})
    if net["channels"] % net["groups"]:
        p.error(f"--channels={net['channels']}; accepted: a multiple of {net['groups']} (GroupNorm's groups)")  # fmt: skip

    check_device(p, a.device)
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(a.threads)
    size = (a.tables, a.decisions, a.seed, a.sim_threads)
    try:
        res = {
            BASE: _run("meeple_mahjong", _sim_rule_bots, *size),
            "env-rule-bots": _run("meeple_mahjong", _env_rule_bots, *size),
            "league-self": _run("meeple_mahjong", _league, *size, net, 1, a.learner, a.device),
        }
        if a.pool:
            pool = _run("meeple_mahjong", _league, *size, net, a.pool, a.learner, a.device)
            res[f"league-pool{a.pool}"] = pool
    finally:
        torch.set_num_threads(threads)  # a caller in the same process (tests) keeps its setting
    ratios: dict[str, float] = {}
    base = res[BASE]
    for name, r in res.items():
        if name == BASE or not (r["ok"] and base["ok"]):
            continue
        for key in ("decisions_per_s", "decisions_per_s_wall", "all_decisions_per_s"):
            ratios[f"{name}/{BASE} {key}"] = round(r[key] / base[key], 4)
        if r["games"] and base["games"]:
            ratios[f"{name}/{BASE} games_per_hour"] = round(
                r["games_per_hour"] / base["games_per_hour"], 4
            )
    payload = {
        "benchmark": "league",
        "config": {"tables": a.tables, "decisions": a.decisions, "network": net, "scale": a.scale,
                   "pool": a.pool, "learner": a.learner, "device": a.device,
                   "device_name": torch.cuda.get_device_name() if a.device.startswith("cuda") else "cpu",
                   "torch_threads": a.threads, "sim_threads": a.sim_threads, "seed": a.seed},  # fmt: skip
        "results": res,
        "ratios": ratios,
        "load_average_1m": os.getloadavg()[0],
        "cpu_count": os.cpu_count(),
        "git": git_state(),
    }
    write_json_atomic(a.out, payload)
    _print_table(res, ratios)
    if any(r["ok"] and r["games"] < a.tables for r in res.values()):
        print(f"note: some rows finished fewer games than tables ({a.tables}): their games/hour "
              "is rough; raise --decisions")  # fmt: skip
    print(f"wrote {a.out}")
    return 0


def _print_table(res: dict[str, dict[str, Any]], ratios: dict[str, float]) -> None:
    cols = ("decisions_per_s", "decisions_per_s_wall", "all_decisions_per_s", "games",
            "games_per_hour", "forwards_per_step", "cpu_s", "wall_s")  # fmt: skip
    print(f"{'row':16s} " + " ".join(cols) + f" x{BASE}")
    for name, r in res.items():
        if not r["ok"]:
            print(f"{name:16s} {r['missing']}")
            continue
        ratio = 1.0 if name == BASE else ratios.get(f"{name}/{BASE} decisions_per_s", float("nan"))
        print(f"{name:16s} " + " ".join(f"{r.get(c, '-')!s:>{len(c)}s}" for c in cols)
              + f" {ratio:>{len(BASE) + 1}.4f}")
    for k, v in ratios.items():
        print(f"{k}: {v}")


if __name__ == "__main__":
    raise SystemExit(main())
