"""Benchmarks: ``python -m meeple.bench`` lists them, ``python -m meeple.bench NAME --help`` runs one.

Benchmarks are scripts that print and save timings; tests never assert timings.
"""

from __future__ import annotations

# name -> (module with ``main(argv)``, one-line description)
BENCHMARKS: dict[str, tuple[str, str]] = {
    "mahjong": (
        "meeple.bench.mahjong",
        "riichi mahjong engine: games/hour and decisions/s vs pymahjong and riichienv (random play)",
    ),
    "ppo": (
        "meeple.bench.ppo",
        "PPO on CartPole to the solve threshold: meeple vs plain TorchRL vs plain PyTorch",
    ),
    "mcts": (
        "meeple.bench.mcts",
        "Connect Four MCTS: native tree and rollout search vs OpenSpiel's MCTSBot, self-play queue fill",
    ),
    "transport": (
        "meeple.bench.transport",
        "env-server round trips: http vs socket vs shm vs in-process (latency percentiles, steps/s, K servers)",
    ),
    "pixels": (
        "meeple.bench.pixels",
        "packed-frame pipeline: env step+render (Warp vs torch), LUT unpack vs copy, diff-LUT reward, "
        "sync vs async PPO",
    ),
    "independent": (
        "meeple.bench.independent",
        "Independent DQN agents: env steps/s and updates/s, multi-process topology vs one sequential loop",
    ),
    "chess": (
        "meeple.bench.chess",
        "chess perft nodes/s: native C++ vs python-chess and OpenSpiel (same positions and depths); self-play",
    ),
}
BENCHMARKS["packed"] = BENCHMARKS["pixels"]  # alias
