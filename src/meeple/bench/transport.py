"""Transport benchmark: round-trip latency and throughput of http, socket and shm env servers
against stepping the same env in-process.

    python -m meeple.bench transport --out transport.json [--steps 10000] [--env counter|<backend>]
        [--obs-size 612 --num-actions 92]   # the seed's layout: JSON of its size over HTTP

Every configuration runs a fresh ``python -m meeple.serve`` child process and one client in
this process: ``--steps`` timed round trips (after ``--warmup``), each stepping all N envs.
Reported per configuration: p50/p95/p99 round-trip latency (us), round trips/s and env
steps/s. Then K = 1, 2, 4, 8 server processes driven by one client (shm: one server with K
worker processes; socket: K servers, the client sends to all, then reads all): env steps/s
and the K=8 / K=1 ratio. The env is ``counter`` (``meeple.envs.counter``: almost free, so the
numbers are the transport's) unless ``--env <backend>`` names an installed env backend (its
default env, its first legal action each step); ``--obs-size`` and ``--num-actions``
size its records (default 4 floats and 4 actions; the seed project's game had 612 and 92, and
its HTTP baseline carried them as JSON lists every step). The JSON records the wait policy and
the load average before and after (busy cores change everything: read them together). The
progress bar redraws only between configurations: a refresh thread would take the GIL from
the timed loop.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from meeple.envs.array import LocalStepper
from meeple.jsonio import write_json_atomic
from meeple.transport.client import connect
from meeple.transport.launch import ServerProcess
from meeple.transport.protocol import MsgType
from meeple.transport.shm import ShmChannel
from meeple.transport.waiting import WaitPolicy

TRANSPORTS = ("http", "socket", "shm")
SIZES = (1, 2, 4, 8, 16)
SERVERS = (1, 2, 4, 8)
EPISODE = 1000  # counter episode length (auto-resets included, rarely)


def env_config(name: str, obs_size: int = 4, num_actions: int = 4) -> dict[str, Any]:
    if name == "counter":
        return {
            "array_env": "meeple.envs.counter:CounterEnv",
            "kwargs": {
                "episode_length": EPISODE,
                "obs_size": obs_size,
                "num_actions": num_actions,
            },
        }
    from meeple.plugins.registry import installed

    if name in installed():
        return {"backend": name}
    raise SystemExit(f"--env {name!r}; accepted: counter, {', '.join(sorted(installed()))}")


class Actions:
    """Legal actions without client-side work in the timed loop (precomputed per phase)."""

    def __init__(self, env: str, num_envs: int, num_actions: int = 4) -> None:
        if env == "counter":  # action t % num_actions is illegal at counter t; all envs share t
            self.table = [
                np.full(num_envs, (t + 1) % num_actions, dtype=np.int32) for t in range(EPISODE)
            ]
        else:  # a backend's env: its first legal action (from the record's mask)
            self.table = None
        self.env = env

    def __call__(self, k: int, records: np.ndarray) -> np.ndarray:
        if self.table is not None:
            return self.table[k % EPISODE]
        return np.argmax(records["mask"], axis=1).astype(np.int32)


def time_loop(
    stepper, env: str, num_envs: int, steps: int, warmup: int, num_actions: int = 4
) -> dict[str, float]:
    actions = Actions(env, num_envs, num_actions)
    records = stepper.reset(0)
    lat = np.empty(steps, dtype=np.int64)
    clock = time.perf_counter_ns
    k = 0
    for _ in range(warmup):
        records = stepper.step(actions(k, records))
        k += 1
    start = clock()
    for i in range(steps):
        a = actions(k, records)
        t0 = clock()
        records = stepper.step(a)
        lat[i] = clock() - t0
        k += 1
    wall = (clock() - start) / 1e9
    p50, p95, p99 = np.percentile(lat / 1e3, [50, 95, 99])
    return dict(
        p50_us=float(p50),
        p95_us=float(p95),
        p99_us=float(p99),
        round_trips_per_s=steps / wall,
        env_steps_per_s=steps * num_envs / wall,
    )


def waits_ended(client, before: dict | None = None) -> dict:
    """How the native shm client's waits ended (spin, yield, futex; warm-up included), less
    ``before``: many ending while yielding mean client and worker shared a core for a while
    (the scheduler put them there), which is what a slow p99 of an idle machine is made of."""
    channel = getattr(client, "channel", None)
    ended = channel.waits_ended() if isinstance(channel, ShmChannel) else None
    if ended is None:
        return {}
    if before:
        ended = [n - b for n, b in zip(ended, before["waits_ended"].values())]
    return {"waits_ended": dict(zip(("spin", "yield", "futex"), ended))}


class MultiSocket:
    """One client over K socket servers: send all requests, then read all replies."""

    def __init__(self, clients: list) -> None:
        self.clients = clients

    def reset(self, seed):
        return [c.reset(seed) for c in self.clients]

    def step(self, actions: np.ndarray):
        from meeple.transport import protocol as P
        from meeple.transport.socket import recv_reply, send_frame

        parts = np.array_split(actions, len(self.clients))
        for c, a in zip(self.clients, parts):
            c._msg_id += 1
            send_frame(c.sock, MsgType.STEP, c._msg_id, P.encode_actions(a))
        return [recv_reply(c.sock, c._single_bytes)[2] for c in self.clients]

    def close(self) -> None:
        for c in self.clients:
            c.close()


def run(args: argparse.Namespace) -> dict[str, Any]:
    env_cfg = env_config(args.env, args.obs_size, args.num_actions)
    policy = WaitPolicy(args.spin_us, args.yield_us)
    extra = [f"transport.spin_us={args.spin_us}", f"transport.yield_us={args.yield_us}"]
    result: dict[str, Any] = {
        "benchmark": "transport",
        "env": args.env,
        "obs_size": args.obs_size if args.env == "counter" else None,
        "num_actions": args.num_actions if args.env == "counter" else None,
        "steps": args.steps,
        "warmup": args.warmup,
        "wait_policy": {"spin_us": args.spin_us, "yield_us": args.yield_us, "then": "futex"},
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "loadavg_before": os.getloadavg(),
        },
        "latency": [],
        "inproc": [],
        "servers": [],
    }
    configs = [(t, n) for t in args.transports for n in args.sizes]
    scaling = [(t, k) for t in ("socket", "shm") if t in args.transports for k in args.servers]
    with Progress(console=Console(stderr=True), auto_refresh=False) as progress:
        task = progress.add_task(
            "transport benchmark", total=len(args.sizes) + len(configs) + len(scaling)
        )
        for n in args.sizes:
            from meeple.envs.array import make_array_env

            local = LocalStepper(make_array_env(env_cfg, n))
            result["inproc"].append(
                {
                    "num_envs": n,
                    **time_loop(local, args.env, n, args.steps, args.warmup, args.num_actions),
                }
            )
            progress.update(task, advance=1, refresh=True)
        for transport, n in configs:
            progress.update(task, description=f"{transport} N={n}", refresh=True)
            server = ServerProcess(
                env_cfg,
                transport=transport,
                num_envs=n,
                num_workers=1 if transport == "shm" else 0,
                extra=extra,
            )
            try:
                client = connect(transport, server.address, policy=policy)
                before = waits_ended(client)
                row = time_loop(client, args.env, n, args.steps, args.warmup, args.num_actions)
                row.update(waits_ended(client, before))
                client.close()
            finally:
                server.stop()
            result["latency"].append({"transport": transport, "num_envs": n, **row})
            progress.update(task, advance=1, refresh=True)
        n = args.scaling_envs
        for transport, k in scaling:
            progress.update(task, description=f"{transport} K={k} servers, N={n}", refresh=True)
            if transport == "shm":
                servers = [
                    ServerProcess(env_cfg, transport="shm", num_envs=n, num_workers=k, extra=extra)
                ]
                client = connect("shm", servers[0].address, policy=policy)
            else:
                sizes = [len(p) for p in np.array_split(np.arange(n), k)]
                servers = [
                    ServerProcess(env_cfg, transport="socket", num_envs=s, extra=extra)
                    for s in sizes
                ]
                client = MultiSocket([connect("socket", s.address) for s in servers])
            try:
                row = (
                    time_loop(client, args.env, n, args.steps // 2, args.warmup, args.num_actions)
                    if args.env == "counter"
                    else {}
                )
            finally:
                client.close()
                for s in servers:
                    s.stop()
            result["servers"].append({"transport": transport, "servers": k, "num_envs": n, **row})
            progress.update(task, advance=1, refresh=True)
    result["machine"]["loadavg_after"] = os.getloadavg()
    result["ratios"] = ratios(result)
    return result


def ratios(result: dict[str, Any]) -> dict[str, Any]:
    def lat(transport: str, n: int, key: str) -> float | None:
        for row in result["latency"]:
            if row["transport"] == transport and row["num_envs"] == n:
                return row[key]
        return None

    out: dict[str, Any] = {}
    for n in sorted({r["num_envs"] for r in result["latency"]}):
        h, s, m = lat("http", n, "p50_us"), lat("socket", n, "p50_us"), lat("shm", n, "p50_us")
        inproc = next((r for r in result["inproc"] if r["num_envs"] == n), None)
        row: dict[str, Any] = {}
        if h and s:
            row["http_over_socket_p50"] = h / s  # goal >= 30
        if s and m:
            row["socket_over_shm_p50"] = s / m  # goal >= 4
        if m:
            row["shm_p99_us"] = lat("shm", n, "p99_us")  # goal < 10
        if inproc:
            for t in TRANSPORTS:
                if (sps := lat(t, n, "env_steps_per_s")) is not None:
                    row[f"{t}_over_inproc_steps_per_s"] = sps / inproc["env_steps_per_s"]
        out[f"N={n}"] = row
    for t in ("socket", "shm"):
        rows = {
            r["servers"]: r
            for r in result["servers"]
            if r["transport"] == t and "env_steps_per_s" in r
        }
        if 1 in rows and 8 in rows:
            out[f"{t}_K8_over_K1_steps_per_s"] = (
                rows[8]["env_steps_per_s"] / rows[1]["env_steps_per_s"]
            )  # >= 0.4
    return out


def print_tables(result: dict[str, Any]) -> None:
    console = Console()
    layout = (
        f", {result['obs_size']} floats, {result['num_actions']} actions"
        if result.get("obs_size")
        else ""
    )
    table = Table(title=f"round trips ({result['env']} env{layout}, {result['steps']} steps each)")
    for col in ("transport", "N", "p50 us", "p95 us", "p99 us", "round trips/s", "env steps/s"):
        table.add_column(col, justify="right")
    rows = [("in-process", row) for row in result["inproc"]]
    rows += [(row["transport"], row) for row in result["latency"]]
    for name, row in rows:
        table.add_row(
            name,
            str(row["num_envs"]),
            f"{row['p50_us']:.1f}",
            f"{row['p95_us']:.1f}",
            f"{row['p99_us']:.1f}",
            f"{row['round_trips_per_s']:,.0f}",
            f"{row['env_steps_per_s']:,.0f}",
        )
    console.print(table)
    if result["servers"]:
        table = Table(title="K server processes, one client")
        for col in ("transport", "K", "N", "p50 us", "p99 us", "env steps/s"):
            table.add_column(col, justify="right")
        for row in result["servers"]:
            if "p50_us" in row:
                table.add_row(
                    row["transport"],
                    str(row["servers"]),
                    str(row["num_envs"]),
                    f"{row['p50_us']:.1f}",
                    f"{row['p99_us']:.1f}",
                    f"{row['env_steps_per_s']:,.0f}",
                )
        console.print(table)
    console.print_json(json.dumps(result["ratios"]))
    console.print(
        f"load average before {result['machine']['loadavg_before']}, after {result['machine']['loadavg_after']}"
    )


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m meeple.bench transport", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--out", type=Path, default=Path("transport.json"))
    p.add_argument("--steps", type=int, default=10_000, help="timed round trips per configuration")
    p.add_argument("--warmup", type=int, default=500)
    p.add_argument("--env", default="counter", help="counter (transport cost) or an installed env backend")
    p.add_argument(
        "--obs-size", type=int, default=4, help="counter: floats per observation (seed: 612)"
    )
    p.add_argument("--num-actions", type=int, default=4, help="counter: actions (seed: 92)")
    p.add_argument("--transports", nargs="+", default=list(TRANSPORTS), choices=TRANSPORTS)
    p.add_argument("--sizes", nargs="+", type=int, default=list(SIZES), help="envs per round trip")
    p.add_argument(
        "--servers", nargs="+", type=int, default=list(SERVERS), help="server processes K"
    )
    p.add_argument("--scaling-envs", type=int, default=16, help="envs in the K-server runs")
    p.add_argument("--spin-us", type=float, default=WaitPolicy.spin_us)
    p.add_argument("--yield-us", type=float, default=WaitPolicy.yield_us)
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    result = run(args)
    write_json_atomic(args.out, result, indent=1)
    print_tables(result)
    return 0
