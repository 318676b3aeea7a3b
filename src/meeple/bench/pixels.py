"""Packed-pixel pipeline benchmark: env, unpack, reward and end-to-end PPO throughput.

    python -m meeple.bench pixels --out pixels.json [--device cuda] [--envs 4096] [--quick]

Measured in one run, on one device (``--device``, default cuda when available):

- ``env``: GoalGrid step + render frames/s with the Warp and the torch renderer
  (frames rendered into a rollout buffer, as in training);
- ``unpack``: LUT unpack of packed frames to float32 (the CNN's first op) and to uint8
  shades, next to a plain device copy (``Tensor.copy_``, memcpy-class) of the unpacked bytes;
  ``ratio_vs_copy`` compares bytes written per second (goal >= 0.8);
- ``reward``: diff-LUT L1 distance throughput (frame pairs/s);
- ``memory``: rollout observation bytes, packed vs unpacked;
- ``train``: end-to-end PPO frames/s, sync vs async double-buffered (same sizes).

Timings synchronise the device only around each timed region. Results go to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning as L
import torch

from meeple.bench import check_device
from meeple.jsonio import write_json_atomic


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], Any], device: torch.device, repeats: int, warmup: int = 2) -> float:
    """Best-of-3 mean seconds per call of ``fn`` over ``repeats`` calls."""
    for _ in range(warmup):
        fn()
    _sync(device)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeats):
            fn()
        _sync(device)
        best = min(best, (time.perf_counter() - start) / repeats)
    return best


def bench_env(device: torch.device, num_envs: int, steps: int) -> dict[str, Any]:
    from meeple.envs.goal_grid import make_goal_grid, warp_available
    from meeple.phases.packed_ppo.buffer import PackedRolloutBuffer

    results: dict[str, Any] = {"num_envs": num_envs, "steps": steps}
    buffer = PackedRolloutBuffer(steps, num_envs, 2, device)
    buffer.actions.copy_(torch.randint(0, 5, (steps, num_envs), device=device))
    for renderer in ("warp", "torch"):
        if renderer == "warp" and not warp_available():
            results[renderer] = {"error": "warp-lang not installed"}
            continue
        env = make_goal_grid(num_envs, device=device, renderer=renderer)
        env.reset(0)

        def rollout(env=env):
            env.render_packed_into(buffer.obs, 0)
            for t in range(steps):
                env.step(buffer.actions, buffer.rewards, buffer.dones, t * num_envs)
                env.render_packed_into(buffer.obs, buffer.obs_offset(t + 1))

        seconds = timed(rollout, device, repeats=1, warmup=1)
        results[renderer] = {
            "frames_per_s": steps * num_envs / seconds,
            "s_per_step": seconds / steps,
        }
    if "frames_per_s" in results.get("warp", {}) and "frames_per_s" in results["torch"]:
        results["warp_over_torch"] = (
            results["warp"]["frames_per_s"] / results["torch"]["frames_per_s"]
        )
    return results


def bench_unpack(device: torch.device, frames: int, repeats: int) -> dict[str, Any]:
    from meeple.envs.packed import UNPACK_LUT, unpack, unpack_lut
    from meeple.nets.packed_cnn import PackedUnpack

    packed = torch.randint(0, 256, (frames, 72, 20), dtype=torch.uint8, device=device)
    to_float = PackedUnpack().to(device)
    lut_u8 = UNPACK_LUT.to(device)
    results: dict[str, Any] = {"frames": frames, "packed_bytes": packed.numel()}
    variants = {
        "lut_float32": (lambda: to_float(packed), 4),
        "lut_uint8": (lambda: unpack_lut(packed, lut_u8), 1),
        "shift_uint8": (lambda: unpack(packed), 1),
    }
    try:
        from meeple.envs.packed_warp import WarpUnpacker

        warp_unpack = WarpUnpacker(device)
        warp_out = torch.empty(frames, 72, 80, dtype=torch.float32, device=device)
        variants["warp_lut_float32"] = (
            lambda: warp_unpack(packed, warp_out),
            4,
        )  # fused, preallocated
    except ImportError:
        pass
    for name, (fn, width) in variants.items():
        out_bytes = packed.numel() * 4 * width
        source = torch.empty(out_bytes, dtype=torch.uint8, device=device)
        target = torch.empty_like(source)
        copy_s = timed(lambda s=source, d=target: d.copy_(s), device, repeats)
        unpack_s = timed(fn, device, repeats)
        results[name] = {
            "unpacked_bytes": out_bytes,
            "unpack_GBps_written": out_bytes / unpack_s / 1e9,
            "copy_GBps_written": out_bytes / copy_s / 1e9,
            "unpack_GBps_read_plus_written": (out_bytes + packed.numel()) / unpack_s / 1e9,
            "copy_GBps_read_plus_written": 2 * out_bytes / copy_s / 1e9,
            "ratio_vs_copy": copy_s / unpack_s,
        }
        del source, target
    return results


def bench_reward(device: torch.device, pairs: int, repeats: int) -> dict[str, Any]:
    from meeple.envs.packed import DIFF_LUT, packed_l1

    a = torch.randint(0, 256, (pairs, 72, 20), dtype=torch.uint8, device=device)
    b = torch.randint(0, 256, (pairs, 72, 20), dtype=torch.uint8, device=device)
    lut = DIFF_LUT.to(device)
    seconds = timed(lambda: packed_l1(a, b, lut), device, repeats)
    return {
        "pairs": pairs,
        "pairs_per_s": pairs / seconds,
        "packed_GBps_read": 2 * a.numel() / seconds / 1e9,
    }


def _fit(device, num_envs, steps, mode, rollouts, minibatch, callbacks, ppo_epochs=2):
    """One Lightning fit of packed PPO on GoalGrid (no Hydra: runs where only torch is)."""
    from meeple.envs.goal_grid import make_goal_grid
    from meeple.nets.packed_cnn import PackedCNN
    from meeple.phases.packed_ppo.data import PackedLearner, PackedRolloutDataModule
    from meeple.phases.packed_ppo.module import PackedPPOModule
    from meeple.seeding import PhaseSeeds

    torch.manual_seed(0)
    module = PackedPPOModule(
        PackedCNN(2, 5, hidden=128),
        optimizer=lambda p: torch.optim.Adam(p, lr=5e-4, eps=1e-5),
        anneal_lr=False,
        max_grad_norm=0.5,
        gamma=0.97,
        gae_lambda=0.95,
        clip_epsilon=0.2,
        entropy_coef=0.01,
        critic_coef=0.5,
        normalize_advantage=True,
        max_importance_weight=2.0,
    )
    dm = PackedRolloutDataModule(
        learner=PackedLearner(module.net, module.prepare_rollout),
        env_factory=lambda num_envs, device: make_goal_grid(num_envs, device=device),
        seeds=PhaseSeeds(1, 0),
        num_envs=num_envs,
        frames_per_obs=2,
        rollout_steps=steps,
        ppo_epochs=ppo_epochs,
        minibatch_size=minibatch,
        mode=mode,
        max_policy_lag=1,
    )
    trainer = L.Trainer(
        accelerator="cuda" if device.type == "cuda" else "cpu",
        devices=1,
        max_epochs=rollouts,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=callbacks,
        default_root_dir=tempfile.mkdtemp(),
    )
    start = time.perf_counter()
    trainer.fit(module, datamodule=dm)
    return dm, trainer, time.perf_counter() - start


def bench_train(
    device: torch.device, num_envs: int, steps: int, rollouts: int, minibatch: int
) -> dict[str, Any]:
    """Steady-state PPO frames/s (collect + update), sync vs async, same sizes."""
    results: dict[str, Any] = {
        "num_envs": num_envs,
        "steps": steps,
        "rollouts": rollouts,
        "minibatch": minibatch,
    }
    for mode in ("sync", "async"):
        timer = EpochTimer(device)
        _fit(device, num_envs, steps, mode, rollouts, minibatch, [timer])
        # The first rollout (warm-up: kernel compilation, allocator) is left out.
        seconds = timer.ends[-1] - timer.ends[0]
        frames = (len(timer.ends) - 1) * num_envs * steps
        results[mode] = {"frames_per_s": frames / seconds, "rollouts_timed": len(timer.ends) - 1}
    results["async_over_sync"] = results["async"]["frames_per_s"] / results["sync"]["frames_per_s"]
    return results


def learn_sizes(envs: int) -> tuple[int, int, int]:
    """Envs, steps per rollout and minibatch of the learn row: 8 minibatches per rollout."""
    num_envs = min(envs, 1024)
    return num_envs, 32, num_envs * 32 // 8


def learn_rollouts(quick: bool, gpu: bool, learn: bool) -> int:
    """The learn row's rollout cap: always on a GPU, on the CPU with --learn; --quick --learn
    runs one rollout (the row's wiring, in tests)."""
    if quick:
        return 1 if learn else 0
    return 60 if gpu else (200 if learn else 0)


def bench_learn(
    device: torch.device,
    num_envs: int,
    steps: int,
    minibatch: int,
    max_rollouts: int,
    modes: tuple[str, ...] = ("sync", "async"),
) -> dict[str, Any]:
    """Frames and seconds until greedy success >= 0.9 on 256 fresh episodes, sync vs async."""
    from meeple.phases.packed_ppo.evaluation import PackedGreedyEvaluation

    results: dict[str, Any] = {"num_envs": num_envs, "steps": steps, "target_success": 0.9}
    for mode in modes:
        evaluation = PackedGreedyEvaluation(2, 256, 40, stop_at_success=0.9)
        dm, _, seconds = _fit(
            device, num_envs, steps, mode, max_rollouts, minibatch, [evaluation], 3
        )
        results[mode] = {
            "success_rate": evaluation.last_success,
            "frames": dm.frames,
            "seconds": seconds,
            "curve": evaluation.history,
        }
    return results


class EpochTimer(L.Callback):
    """Wall clock at each rollout's end, after the device has finished its work."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.ends: list[float] = []

    def on_train_epoch_end(self, trainer, module) -> None:
        _sync(self.device)
        self.ends.append(time.perf_counter())


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m meeple.bench pixels", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--out", type=Path, default=Path("pixels.json"))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--envs", type=int, default=None, help="envs per batch (default 4096 on cuda, 64 on cpu)"
    )
    parser.add_argument("--learn", action="store_true", help="also train to success 0.9 on cpu")
    parser.add_argument("--modes", nargs="+", choices=("sync", "async"), default=["sync", "async"])
    parser.add_argument("--only", nargs="+", choices=("env", "unpack", "reward", "train", "learn"))
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    args = parser.parse_args(argv)
    check_device(parser, args.device)
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    device = torch.device(args.device)
    gpu = device.type == "cuda"
    envs = args.envs or (4096 if gpu else 64)
    quick = args.quick
    sizes = {
        "env_steps": 8 if quick else 64,
        "unpack_frames": 256 if quick else (65536 if gpu else 4096),
        "repeats": 2 if quick else (20 if gpu else 5),
        "train_envs": min(envs, 8) if quick else (envs if gpu else 32),
        "train_steps": 8 if quick else (64 if gpu else 32),
        "train_rollouts": 3 if quick else (12 if gpu else 6),
        "learn_rollouts": learn_rollouts(quick, gpu, args.learn),
    }
    torch.set_num_threads(max(os.cpu_count() or 1, 1) if gpu else 1)
    report: dict[str, Any] = {
        "device": torch.cuda.get_device_name(device) if gpu else platform.processor() or "cpu",
        "torch": torch.__version__,
        "sizes": sizes,
    }
    from meeple.envs.packed import rollout_bytes

    report["memory"] = rollout_bytes(sizes["train_steps"], sizes["train_envs"], 2)
    report["memory"]["unpacked_float32_over_packed"] = (
        report["memory"]["unpacked_float32"] / report["memory"]["packed"]
    )
    learn = sizes["learn_rollouts"] > 0
    steps = [
        ("env", lambda: bench_env(device, envs if not quick else 16, sizes["env_steps"])),
        ("unpack", lambda: bench_unpack(device, sizes["unpack_frames"], sizes["repeats"])),
        ("reward", lambda: bench_reward(device, sizes["unpack_frames"], sizes["repeats"])),
        (
            "train",
            lambda: bench_train(
                device,
                sizes["train_envs"],
                sizes["train_steps"],
                sizes["train_rollouts"],
                minibatch=max(sizes["train_envs"] * sizes["train_steps"] // 8, 8),
            ),
        ),
    ]
    if learn:
        steps.append(
            ("learn", lambda: bench_learn(device, *learn_sizes(envs), sizes["learn_rollouts"]))
        )
    try:
        from rich.progress import track
    except ImportError:  # pragma: no cover

        def track(items, description=""):
            return items

    if args.only:
        steps = [(name, run) for name, run in steps if name in args.only]
    for name, run in track(steps, description="pixels bench"):
        report[name] = run()
        write_json_atomic(args.out, report)
    print(json.dumps(report, indent=2))
    return 0
