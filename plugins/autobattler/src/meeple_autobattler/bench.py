"""``python -m meeple.bench autobattler``: the auto-battler's benchmark matrix and fights/s.

    python -m meeple.bench autobattler [--seconds 10] [--out autobattler.json]

Rows, each a Node server (``--game autobattler``) and one client here, random legal play in all
8 seats through STEP_MULTI, with an MLP policy's forward in the loop (its actions are replaced
by random legal ones, so every row plays the same kind of game):

  http 1 env -> socket 1 env -> shm 1 env -> shm 32 envs (one forward per env, as a per-env
  client would) -> + batched inference (one forward for all seats of all envs) -> + batched
  combat (the server's fights run by the torch combat service on the CPU, one exchange per
  request: ``--combat batched:PATH``, meeple_autobattler.combat_server)

Reported: env steps/s (one STEP_MULTI moves every seat of one env), games/s, CPU % of client
and server (and combat service) together (of one core), and resident memory of all. Then fights/s of the TypeScript
reference fight (one Node thread) against the batched torch fight (``combat.simulate``) on the
CPU, and on CUDA when there is one.

``--train-decisions N`` adds the training column: per row, ``+experiment=autobattler_selfplay``
over that row's transport, games and combat for N decisions (rollouts of 8,192 decisions
whatever the games, so every row makes the same updates), then the policy in one seat against 7
scripted players (``--eval-games`` games, mean place with its t-interval; 4.5 = equal) and the
training's wall time. Training always batches the forward over all rows, so "shm 32 envs" and
"+ batched inference" are one training run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import psutil
import torch
from rich.console import Console
from rich.table import Table

from meeple.jsonio import write_json_atomic
from meeple.transport import node
from meeple.transport.client import connect
from meeple_autobattler import combat
from meeple_autobattler import layout as L
from meeple_autobattler.backend import start_combat_service, start_server
from meeple_autobattler.policies import random_actions

ROWS = [  # (name, transport, envs, batched inference, batched combat)
    ("http 1 env", "http", 1, False, False),
    ("socket 1 env", "socket", 1, False, False),
    ("shm 1 env", "shm", 1, False, False),
    ("shm 32 envs", "shm", 32, False, False),
    ("+ batched inference", "shm", 32, True, False),
    ("+ batched combat", "shm", 32, True, True),
]


@dataclass
class Row:
    name: str
    env_steps_per_s: float
    games_per_s: float
    cpu_percent: float
    rss_mb: float
    error: str | None = None


def policy_net() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Linear(L.OBS_SIZE, 256), torch.nn.Tanh(), torch.nn.Linear(256, 256), torch.nn.Tanh(),
        torch.nn.Linear(256, L.NUM_ACTIONS),
    )


@torch.no_grad()
def run_row(
    name: str, transport: str, envs: int, batched: bool, seconds: float, combat_service: bool = False
) -> Row:
    service = start_combat_service("cpu") if combat_service else None
    combat = f"batched:{service.address}" if service is not None else "local"
    try:
        server = start_server(envs, transport=transport, num_workers=1, combat=combat)
    except BaseException:
        if service is not None:
            service.stop()
        raise
    net, rng = policy_net(), np.random.default_rng(0)
    try:
        client = connect(transport, server.address)
        procs = [psutil.Process(), psutil.Process(server.proc.pid)]
        if service is not None:
            procs.append(psutil.Process(service.proc.pid))
        client.reset(0)
        records = client.observe(all_seats=True)
        steps = games = 0
        cpu0 = sum(p.cpu_times().user + p.cpu_times().system for p in procs)
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            obs = torch.from_numpy(np.array(records["obs"]).reshape(envs * L.PLAYERS, -1))
            if batched:
                net(obs)
            else:
                for e in range(envs):
                    net(obs[e * L.PLAYERS : (e + 1) * L.PLAYERS])
            mask = np.array(records["mask"]).astype(bool).reshape(envs * L.PLAYERS, -1)
            mask[~mask.any(axis=1), L.A_END] = True
            records = client.step_multi(random_actions(rng, mask).reshape(envs, L.PLAYERS))
            steps += envs
            games += int(np.array(records["done"])[:, 0].sum())
        wall = time.perf_counter() - start
        cpu = sum(p.cpu_times().user + p.cpu_times().system for p in procs) - cpu0
        rss = sum(p.memory_info().rss for p in procs) / 2**20
        client.close()
        return Row(name, steps / wall, games / wall, 100 * cpu / wall, rss)
    finally:
        server.stop()
        if service is not None:
            service.stop()


ROLLOUT_DECISIONS = 8192  # the experiment's rollout (16 games x 8 seats x 64 steps), kept in every row


@dataclass
class Training:
    name: str
    decisions: int
    wall_s: float
    mean_place: float
    ci95: tuple[float, float]
    games: int


def train_row(name: str, transport: str, envs: int, combat_service: bool, decisions: int, eval_games: int,
              seed: int = 1) -> Training:
    """Self-play for ``decisions`` decisions over the row's transport, then placement vs 7 scripted."""
    from meeple.cli.train import train
    from meeple.config.compose import compose_config
    from meeple.export.policy import load_policy
    from meeple_autobattler.evaluate import opponent_act, play, policy_act, report

    rows = envs * L.PLAYERS
    with tempfile.TemporaryDirectory(prefix="meeple-ab-train-") as tmp:
        cfg = compose_config([
            "+experiment=autobattler_selfplay", f"transport={transport}", f"env.num_envs={rows}",
            f"env.combat={'batched' if combat_service else 'local'}", f"phase.rollout_steps={ROLLOUT_DECISIONS // rows}",
            f"phase.total_frames={decisions}", "phase.eval.every_n_rollouts=1000000", "phase.eval.episodes=8",
            "tracking=none", "callbacks.progress=null", f"checkpoint.root={tmp}/runs", f"paths.output_root={tmp}/out",
            f"seed={seed}",
        ])
        start = time.perf_counter()
        train(cfg)
        wall = time.perf_counter() - start
        (run,) = Path(tmp, "runs").iterdir()
        act = policy_act(load_policy(str(run)).policy)
        places = play(act, opponent_act("scripted", seed + 1000), games=eval_games, seed=seed + 1000)
    rep = report(places, "scripted")
    return Training(name, decisions, wall, rep.mean_place, rep.ci95, rep.games)


def training_rows(decisions: int, eval_games: int, rows: list[tuple] = ROWS) -> list[Training | tuple[str, str]]:
    """One training per distinct (transport, envs, combat) of ``rows``; a failure says why and the others go on."""
    done: dict[tuple, Training] = {}
    out: list[Training | tuple[str, str]] = []
    for name, transport, envs, _batched, combat_service in rows:
        key = (transport, envs, combat_service)
        if key in done:
            out.append(done[key])
            continue
        try:
            done[key] = train_row(name, transport, envs, combat_service, decisions, eval_games)
            out.append(done[key])
        except Exception as err:  # noqa: BLE001 - a row that cannot train says why
            out.append((name, f"{type(err).__name__}: {err}"))
    return out


@dataclass
class FightRate:
    simulator: str
    fights: int
    fights_per_s: float


def fight_rates(count: int, seed: int = 0) -> list[FightRate]:
    dist = node.build()
    out = subprocess.run(
        ["node", str(dist / "games/autobattler/cli.js"), "fights", "--count", str(count), "--seed", str(seed),
         "--repeat", "3", "--out", "/tmp/meeple-autobattler-bench"],
        check=True, capture_output=True, text=True,
    )
    rates = [FightRate("TypeScript reference (1 thread)", count, json.loads(out.stdout)["fights_per_s"])]
    boards = np.fromfile("/tmp/meeple-autobattler-bench/boards.bin", dtype=np.int32).reshape(count, 32, 9)
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for device in devices:
        units = torch.from_numpy(boards).to(device)
        combat.simulate(units[:256])  # warm-up
        best = float("inf")
        for _ in range(3):
            if device == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            combat.simulate(units)
            if device == "cuda":
                torch.cuda.synchronize()
            best = min(best, time.perf_counter() - start)
        threads = f"{torch.get_num_threads()} threads" if device == "cpu" else torch.cuda.get_device_name()
        rates.append(FightRate(f"batched torch, {device} ({threads})", count, count / best))
    return rates


def main(argv: list[str] | None = None) -> int:
    """auto-battler from Node: http -> socket -> shm -> 32 envs -> batched inference -> batched combat; fights/s TS vs torch"""
    parser = argparse.ArgumentParser(prog="python -m meeple.bench autobattler", description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="timed play per row")
    parser.add_argument("--fights", type=int, default=20000)
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    parser.add_argument("--train-decisions", type=int, default=0,
                        help="also train self-play this many decisions per row and evaluate it (0: off)")
    parser.add_argument("--eval-games", type=int, default=200, help="games vs 7 scripted players per trained row")
    parser.add_argument("--rows", default=None,
                        help=f"comma-separated row names to run (default: all: {', '.join(r[0] for r in ROWS)})")
    args = parser.parse_args(argv)
    selected = ROWS
    if args.rows:
        wanted = [w.strip() for w in args.rows.split(",") if w.strip()]
        unknown = [w for w in wanted if w not in {r[0] for r in ROWS}]
        if unknown or not wanted:
            parser.error(f"--rows {args.rows!r}: unknown {unknown}; accepted: a comma-separated subset of "
                         f"{', '.join(r[0] for r in ROWS)}")
        selected = [r for r in ROWS if r[0] in wanted]
    if args.train_decisions and args.train_decisions < ROLLOUT_DECISIONS:
        parser.error(f"--train-decisions {args.train_decisions}; accepted: 0 (off) or >= {ROLLOUT_DECISIONS} "
                     "(one rollout)")
    console = Console()
    rows = []
    for name, transport, envs, batched, combat_service in selected:
        try:
            rows.append(run_row(name, transport, envs, batched, args.seconds, combat_service))
        except Exception as err:  # noqa: BLE001 - a row that cannot run says why; the others go on
            rows.append(Row(name, 0, 0, 0, 0, f"{type(err).__name__}: {err}"))
    table = Table(title=f"auto-battler, random play in 8 seats, {args.seconds:.0f} s a row (load {psutil.getloadavg()[0]:.2f})")
    for col in ("row", "env steps/s", "games/s", "CPU %", "RSS MB", f"x {selected[0][0]}"):
        table.add_column(col)
    base = rows[0].env_steps_per_s or float("nan")
    for r in rows:
        if r.error:
            table.add_row(r.name, "-", "-", "-", "-", r.error[:60])
        else:
            table.add_row(r.name, f"{r.env_steps_per_s:,.0f}", f"{r.games_per_s:.2f}", f"{r.cpu_percent:.0f}",
                          f"{r.rss_mb:.0f}", f"{r.env_steps_per_s / base:.1f}")
    console.print(table)
    rates = fight_rates(args.fights)
    fights = Table(title=f"fights/s, {args.fights:,} random boards")
    for col in ("simulator", "fights/s", "x reference"):
        fights.add_column(col)
    for r in rates:
        fights.add_row(r.simulator, f"{r.fights_per_s:,.0f}", f"{r.fights_per_s / rates[0].fights_per_s:.2f}")
    console.print(fights)
    trained = training_rows(args.train_decisions, args.eval_games, selected) if args.train_decisions else []
    if trained:
        t = Table(title=f"self-play for {args.train_decisions:,} decisions per row, then {args.eval_games} games "
                        "in one seat vs 7 scripted players (4.5 = equal)")
        for col in ("row", "mean place [95%]", "training wall s", "decisions/s"):
            t.add_column(col)
        for (name, *_), r in zip(selected, trained, strict=True):
            if isinstance(r, tuple):
                t.add_row(name, "-", "-", r[1][:60])
            else:
                same = "" if r.name == name else f" (= {r.name}: training always batches)"
                t.add_row(name + same, f"{r.mean_place:.2f} [{r.ci95[0]:.2f}, {r.ci95[1]:.2f}]", f"{r.wall_s:.0f}",
                          f"{r.decisions / r.wall_s:,.0f}")
        console.print(t)
    if args.out:
        write_json_atomic(args.out, {"rows": [asdict(r) for r in rows], "fights": [asdict(r) for r in rates],
                                     "training": [asdict(r) if isinstance(r, Training) else {"error": r[1]}
                                                  for r in trained],
                                     "load": psutil.getloadavg()})
    return 0
