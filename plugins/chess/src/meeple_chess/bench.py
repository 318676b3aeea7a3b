"""Chess self-play speed with the chess experiment's network and engine settings.

    python -m meeple.bench chess_selfplay --out chess_selfplay.json [--seconds 30]
        [--device cpu] [OVERRIDE ...]      e.g. model.channels=64 phase.selfplay.num_workers=1

Composes ``+experiment=chess_alphazero`` (plus the overrides) exactly as ``train.py`` would, builds
its network (untrained; the default is ``conf/model/az_resnet.yaml``) and runs
``meeple_native.chess.SelfPlay`` with the experiment's ``phase.selfplay`` options through the
phase's ``TorchEvaluator`` for ``--seconds``; reports positions/s, simulations/s, network
evaluations/s, the evaluation queue's batch fill, evaluator idle share and queue latency. An
untrained network plays long games (~250 plies), so the rate is that of the first iterations.
"""

from __future__ import annotations

import argparse
import os
import threading
from pathlib import Path
from typing import Any

METRICS = ("wall_s", "positions", "positions_per_s", "simulations_per_s", "evaluations", "mean_batch_size",
           "mean_fill_ratio", "evaluator_idle_fraction", "queue_latency_p50_us", "queue_latency_p99_us",
           "cache_hit_rate")  # fmt: skip


def measure(overrides: list[str], seconds: float, device: str) -> dict[str, Any]:
    import torch
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from meeple.config.compose import compose_config
    from meeple.phases.alphazero.evaluator import TorchEvaluator
    from meeple_chess.game import game

    cfg = compose_config(["+experiment=chess_alphazero", *overrides])
    torch.set_num_threads(int(cfg.hardware.torch_threads))  # as a training run does (hardware profile)
    torch.manual_seed(0)
    net = instantiate(cfg.model)(game.planes_shape, game.num_actions).to(device).eval()
    options = OmegaConf.to_container(cfg.phase.selfplay, resolve=True)
    evaluator = TorchEvaluator(net, device)
    buffers = evaluator.planes_buffers(int(options.get("batch_size", 16)), game.planes_shape)
    engine = game.selfplay_engine(evaluator, seed=0, planes_buffers=buffers, **options)
    timer = threading.Timer(seconds, engine.stop)
    timer.start()
    try:
        out = engine.run(1_000_000)
    finally:
        timer.cancel()
        engine.close()
    m = out["metrics"]
    model = {k: v for k, v in OmegaConf.to_container(cfg.model).items() if not k.startswith("_")}
    return {"network": f"{cfg.model._target_.rsplit('.', 1)[-1]} {model}", "device": device,
            "parameters": sum(p.numel() for p in net.parameters()), "selfplay": options,
            "games_finished": len(out["moves"]), "torch_threads": torch.get_num_threads(),
            **{k: round(float(m[k]), 3) for k in METRICS if k in m},
            "evaluations_per_s": round(float(m["evaluations"]) / float(m["wall_s"]), 1)}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """chess self-play positions/s and batch fill with the chess_alphazero network and settings"""
    p = argparse.ArgumentParser(prog="python -m meeple.bench chess_selfplay", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=Path("chess_selfplay.json"), help="JSON results file")
    p.add_argument("--seconds", type=float, default=30.0, help="seconds of self-play")
    p.add_argument("--device", default="cpu", help="torch device of the network (cpu, cuda)")
    p.add_argument("overrides", nargs="*", help="Hydra overrides of the chess_alphazero experiment")
    a = p.parse_args(argv)
    if a.seconds <= 0:
        p.error("--seconds must be > 0")
    from meeple.bench import check_device
    from meeple.provenance import git_state

    check_device(p, a.device)
    from meeple.jsonio import write_json_atomic

    row = measure(a.overrides, a.seconds, a.device)
    payload = {"benchmark": "chess_selfplay", "overrides": a.overrides, **row,
               "load_average_1m": os.getloadavg()[0], "cpu_count": os.cpu_count(), "git": git_state()}  # fmt: skip
    write_json_atomic(a.out, payload)
    print(f"{row['network']} on {row['device']}, {row['selfplay']['num_simulations']} simulations a move: "
          f"{row['positions_per_s']:.1f} positions/s, {row['simulations_per_s']:.0f} simulations/s, "
          f"{row['evaluations_per_s']:.0f} evaluations/s, batch fill {row['mean_fill_ratio']:.2f} "
          f"(mean batch {row['mean_batch_size']:.1f}), evaluator idle {100 * row['evaluator_idle_fraction']:.0f}%, "
          f"queue latency p50 {row['queue_latency_p50_us']:.0f} us")  # fmt: skip
    print(f"wrote {a.out}")
    return 0
