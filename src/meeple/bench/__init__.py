"""Benchmarks: ``python -m meeple.bench`` lists them, ``python -m meeple.bench NAME --help`` runs one.

Benchmarks are scripts that print and save timings; tests never assert timings.
"""

from __future__ import annotations

# name -> (module with ``main(argv)``, one-line description)
BENCHMARKS: dict[str, tuple[str, str]] = {
    "ppo": (
        "meeple.bench.ppo",
        "PPO on CartPole to the solve threshold: meeple vs plain TorchRL vs plain PyTorch",
    ),
    "independent": (
        "meeple.bench.independent",
        "Independent DQN agents: env steps/s and updates/s, multi-process topology vs one sequential loop",
    ),
}
