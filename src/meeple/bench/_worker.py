"""One benchmark run in its own process: ``python -m meeple.bench._worker IMPL SEED --result FILE [overrides]``.

A fresh interpreter per run keeps runs from sharing state (allocator, caches,
global RNGs, Lightning/MLflow singletons). Writes the run's result as JSON.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from pathlib import Path

import torch

IMPLS = ("meeple", "torchrl", "plain")


def code_fingerprint() -> str:
    """Hash of the meeple code and config this run imports (the tree may change between runs)."""
    import meeple

    root = Path(meeple.__file__).resolve().parents[2]
    digest = hashlib.sha256()
    for base, pattern in (("src/meeple", "*.py"), ("conf", "*.yaml"), ("plugins", "*.py"), ("plugins", "*.yaml")):
        for path in sorted((root / base).rglob(pattern)):
            if "bench" in path.relative_to(root).parts or "tests" in path.relative_to(root).parts:
                continue
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def run_impl(impl: str, seed: int, overrides: list[str]) -> dict:
    from meeple.bench.common import PPOHparams
    from meeple.config.compose import compose_config

    if impl == "meeple":
        from meeple.bench.meeple_run import train

        return train(overrides, seed)
    hp = PPOHparams.from_config(compose_config(overrides))
    if impl == "torchrl":
        from meeple.bench.torchrl_ppo import train
    elif impl == "plain":
        from meeple.bench.plain_ppo import train
    else:
        raise ValueError(f"unknown implementation {impl!r}; accepted: {', '.join(IMPLS)}")
    return train(hp, seed)


def main(argv: list[str] | None = None) -> None:
    start = time.perf_counter()
    torch.set_num_threads(1)
    parser = argparse.ArgumentParser(prog="python -m meeple.bench._worker")
    parser.add_argument("impl", choices=IMPLS)
    parser.add_argument("seed", type=int)
    parser.add_argument("--result", required=True, type=Path)
    parser.add_argument("overrides", nargs="*", help="config overrides (key=value)")
    args = parser.parse_intermixed_args(argv)
    fingerprint = code_fingerprint()  # before the imports the run uses
    result = run_impl(args.impl, args.seed, args.overrides)
    result.update(
        impl=args.impl,
        seed=args.seed,
        code_fingerprint=fingerprint,
        worker_s=time.perf_counter() - start,
        torch_threads=torch.get_num_threads(),
    )
    tmp = args.result.with_suffix(".tmp")
    tmp.write_text(json.dumps(result))
    os.replace(tmp, args.result)


if __name__ == "__main__":
    main()
