"""Chess move generation speed: meeple's native perft against python-chess and OpenSpiel.

    python -m meeple.bench chess --out chess.json [--depth-offset 0] [--selfplay-games 8]
                                 [--network-seconds 20]

Every peer counts the same positions (start, Kiwipete, positions 3-6 of the Chess Programming
Wiki's perft page) to the same depths, with the same algorithm: recursive legal move
generation, the last ply counted without playing its moves (bulk counting). meeple runs it in
C++ (``meeple_native.chess.perft``, one thread); python-chess through its Python API
(``push``/``pop``, ``legal_moves.count()``); OpenSpiel (``pyspiel``, C++ rules) through its
Python API (``state.child``, ``len(state.legal_actions())``). Each count is checked against the
published number. Rates are leaves per CPU second of this process (one core); meeple repeats
each count until it has run 0.3 s. A peer that does not import is reported as missing, with
the command that installs it.

Two self-play rows run ``meeple_native.chess.SelfPlay``: with the built-in uniform evaluator
(no network: the engine's own speed), and with the default AlphaZero network
(``conf/model/az_resnet.yaml``, 32 channels, 2 blocks, untrained) on CPU through
``TorchEvaluator`` with the AlphaZero phase's default engine settings (2 workers x 16 games x 4
leaves, batch 64, 32 simulations), stopped after ``--network-seconds``: positions/s, batch
fill and evaluator idle share.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from meeple.jsonio import write_json_atomic
from meeple.provenance import git_state

# name, FEN, depth, published perft count at that depth
POSITIONS: list[tuple[str, str, list[int]]] = [
    ("start", "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",
     [20, 400, 8902, 197281, 4865609]),
    ("kiwipete", "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1",
     [48, 2039, 97862, 4085603]),
    ("position3", "8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1", [14, 191, 2812, 43238, 674624]),
    ("position4", "r3k2r/Pppp1ppp/1b3nbN/nP6/BBP1P3/q4N2/Pp1P2PP/R2Q1RK1 w kq - 0 1",
     [6, 264, 9467, 422333]),
    ("position5", "rnbq1k1r/pp1Pbppp/2p5/8/2B5/8/PPP1NnPP/RNBQK2R w KQ - 1 8",
     [44, 1486, 62379, 2103487]),
    ("position6", "r4rk1/1pp1qppp/p1np1n2/2b1p1B1/2B1P1b1/P1NP1N2/1PP1QPPP/R4RK1 w - - 0 10",
     [46, 2079, 89890, 3894594]),
]  # fmt: skip

INSTALL = {
    "python-chess": "pip install chess   (or pip install -e '.[test]')",
    "openspiel": "pip install open-spiel",
}


def _meeple(fen: str, depth: int) -> tuple[int, float]:
    from meeple_native.chess import perft

    perft(fen, 1)  # the first call builds the attack tables (~0.4 s of CPU): not part of the rate
    runs, nodes, c0 = 0, 0, time.process_time()
    while True:
        nodes = perft(fen, depth)
        runs += 1
        cpu = time.process_time() - c0
        if cpu >= 0.3:
            return nodes, cpu / runs


def _python_chess(fen: str, depth: int) -> tuple[int, float]:
    import chess

    def count(board: chess.Board, d: int) -> int:
        if d == 1:
            return board.legal_moves.count()
        n = 0
        for move in board.legal_moves:
            board.push(move)
            n += count(board, d - 1)
            board.pop()
        return n

    c0 = time.process_time()
    nodes = count(chess.Board(fen), depth)
    return nodes, time.process_time() - c0


def _openspiel(fen: str, depth: int) -> tuple[int, float]:
    import pyspiel

    game = pyspiel.load_game("chess")

    def count(state, d: int) -> int:
        actions = state.legal_actions()
        if d == 1:
            return len(actions)
        return sum(count(state.child(a), d - 1) for a in actions)

    c0 = time.process_time()
    nodes = count(game.new_initial_state(fen), depth)
    return nodes, time.process_time() - c0


PEERS = {"meeple": _meeple, "python-chess": _python_chess, "openspiel": _openspiel}
IMPORTS = {"meeple": "meeple_native.chess", "python-chess": "chess", "openspiel": "pyspiel"}


def _perft_rows(depth_offset: int) -> dict[str, Any]:
    import importlib

    res: dict[str, Any] = {}
    for peer, fn in PEERS.items():
        try:
            importlib.import_module(IMPORTS[peer])
        except ImportError as e:
            res[peer] = {"ok": False, "missing": f"{IMPORTS[peer]} does not import ({e}); "
                                                 f"install: {INSTALL.get(peer, 'pip install ./native')}"}
            continue
        rows, total_nodes, total_cpu = {}, 0, 0.0
        for name, fen, counts in POSITIONS:
            depth = max(1, len(counts) + depth_offset)
            nodes, cpu = fn(fen, depth)
            rows[name] = {"depth": depth, "nodes": nodes, "cpu_s": round(cpu, 5),
                          "nodes_per_s": round(nodes / cpu, 1),
                          "matches_published": nodes == counts[depth - 1]}  # fmt: skip
            total_nodes += nodes
            total_cpu += cpu
        res[peer] = {"ok": True, "positions": rows, "nodes": total_nodes,
                     "cpu_s": round(total_cpu, 4), "nodes_per_s": round(total_nodes / total_cpu, 1)}  # fmt: skip
    return res


def _selfplay(games: int, simulations: int) -> dict[str, Any]:
    from meeple_native.chess import SelfPlay

    out: dict[str, Any] = {}
    for workers in (1, 2):
        sp = SelfPlay(None, num_simulations=simulations, num_workers=workers, games_per_worker=8,
                      leaves_per_game=2, batch_size=16, seed=0)  # fmt: skip
        m = sp.run(games)["metrics"]
        out[f"W{workers}"] = {k: round(float(m[k]), 3) for k in (
            "wall_s", "positions", "positions_per_s", "simulations_per_s", "mean_fill_ratio")}  # fmt: skip
    return out


def _selfplay_network(seconds: float, simulations: int) -> dict[str, Any]:
    """Self-play with the default AlphaZero network (conf/model/az_resnet.yaml: 32 channels,
    2 blocks) on CPU and the AlphaZero phase's default engine settings, stopped after ``seconds``."""
    import threading

    from meeple.nets.az_resnet import build_az_resnet
    from meeple.phases.alphazero.evaluator import TorchEvaluator
    from meeple_native.chess import NUM_ACTIONS, PLANES_SHAPE, SelfPlay

    net = build_az_resnet(tuple(PLANES_SHAPE), NUM_ACTIONS, channels=32, blocks=2).eval()
    evaluator = TorchEvaluator(net)
    batch = 64
    sp = SelfPlay(evaluator, num_simulations=simulations, num_workers=2, games_per_worker=16,
                  leaves_per_game=4, batch_size=batch, timeout_us=2000, seed=0,
                  planes_buffers=evaluator.planes_buffers(batch, tuple(PLANES_SHAPE)))  # fmt: skip
    timer = threading.Timer(seconds, sp.stop)
    timer.start()
    try:
        m = sp.run(1_000_000)["metrics"]
    finally:
        timer.cancel()
    keys = ("wall_s", "positions", "positions_per_s", "simulations_per_s", "evaluations", "mean_fill_ratio",
            "evaluator_idle_fraction", "queue_latency_p50_us")  # fmt: skip
    return {"network": "az_resnet channels=32 blocks=2 (CPU)", "num_simulations": simulations,
            **{k: round(float(m[k]), 3) for k in keys},
            "evaluations_per_s": round(m["evaluations"] / m["wall_s"], 1)}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """chess perft nodes/s: native C++ vs python-chess and OpenSpiel (same positions and depths); self-play"""
    p = argparse.ArgumentParser(prog="python -m meeple.bench chess", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=Path("chess.json"), help="JSON results file")
    p.add_argument("--depth-offset", type=int, default=0,
                   help="add this to every depth (e.g. -1 for a quick run; default depths: start 5, "
                        "Kiwipete 4, position 3 5, positions 4-6 4)")  # fmt: skip
    p.add_argument("--selfplay-games", type=int, default=8, help="games for the self-play row (0 = skip)")
    p.add_argument("--simulations", type=int, default=64, help="MCTS simulations per move in self-play")
    p.add_argument("--network-seconds", type=float, default=20.0,
                   help="seconds of self-play with the default AlphaZero network on CPU (0 = skip; needs torch)")
    a = p.parse_args(argv)
    if a.depth_offset > 0:
        p.error("--depth-offset must be <= 0 (the published counts stored here end at the default depths)")
    res = _perft_rows(a.depth_offset)
    ratios = {}
    if res["meeple"]["ok"]:
        for peer in ("python-chess", "openspiel"):
            if res[peer]["ok"]:
                ratios[f"meeple/{peer} nodes_per_s"] = round(
                    res["meeple"]["nodes_per_s"] / res[peer]["nodes_per_s"], 1)
    selfplay = _selfplay(a.selfplay_games, a.simulations) if a.selfplay_games > 0 and res["meeple"]["ok"] else {}
    network: dict[str, Any] = {}
    if a.network_seconds > 0 and res["meeple"]["ok"]:
        try:
            network = _selfplay_network(a.network_seconds, 32)
        except ImportError as e:
            network = {"missing": f"torch does not import ({e})"}
    payload = {
        "benchmark": "chess",
        "perft": res,
        "ratios": ratios,
        "selfplay_uniform": selfplay,
        "selfplay_network": network,
        "load_average_1m": os.getloadavg()[0],
        "cpu_count": os.cpu_count(),
        "git": git_state(),
    }
    write_json_atomic(a.out, payload)
    print(f"{'peer':14s} {'position':10s} {'depth':>5s} {'nodes':>12s} {'cpu s':>9s} {'nodes/s':>14s}  ok")
    for peer, r in res.items():
        if not r["ok"]:
            print(f"{peer:14s} missing: {r['missing']}")
            continue
        for name, row in r["positions"].items():
            print(f"{peer:14s} {name:10s} {row['depth']:5d} {row['nodes']:12d} {row['cpu_s']:9.4f} "
                  f"{row['nodes_per_s']:14,.0f}  {row['matches_published']}")  # fmt: skip
        print(f"{peer:14s} {'total':10s} {'':5s} {r['nodes']:12d} {r['cpu_s']:9.4f} {r['nodes_per_s']:14,.0f}")
    for k, v in ratios.items():
        print(f"{k}: {v}x")
    for k, v in selfplay.items():
        print(f"selfplay uniform {k}: {v}")
    if network:
        print(f"selfplay network: {network}")
    print(f"wrote {a.out}")
    return 0
