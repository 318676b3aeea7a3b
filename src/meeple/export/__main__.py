"""``python -m meeple.export SOURCE --out policy.onnx``: export a checkpoint's policy to ONNX."""

from __future__ import annotations

import argparse
import sys

from meeple.errors import MeepleError


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from meeple.export.onnx import OPSET, TOLERANCE

    p = argparse.ArgumentParser(
        prog="python -m meeple.export",
        description="Export a trained policy (masked logits + value) to ONNX and check it against eager torch.",
    )
    p.add_argument("source", help="a run directory (outputs/runs/<id>: its newest stage's latest.pt), "
                                  "a checkpoint file, or a gate file (gates/<stage>.pt)")  # fmt: skip
    p.add_argument("--out", default="policy.onnx", help="the ONNX file (a JSON sidecar is written beside it)")
    p.add_argument("--opset", type=int, default=OPSET, help=f"ONNX opset (default {OPSET})")
    p.add_argument("--tolerance", type=float, default=TOLERANCE,
                   help=f"largest |logits or value difference| accepted (default {TOLERANCE:g})")  # fmt: skip
    p.add_argument("--samples", type=int, default=64, help="observations recorded from the env for the check")
    p.add_argument("--seed", type=int, default=0, help="seed of the env that records them")
    args = p.parse_args(argv)
    if args.samples < 1 or args.tolerance < 0:
        p.error(f"--samples {args.samples} --tolerance {args.tolerance}: accepted: samples >= 1, tolerance >= 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        from meeple.export.onnx import require_onnx

        require_onnx()  # before the checkpoint is read: the missing extra is the first thing to say
        from meeple.export.onnx import write_policy
        from meeple.export.policy import load_policy

        loaded = load_policy(args.source)
        samples = loaded.samples(args.samples, args.seed)
        out, parity = write_policy(loaded, args.out, opset=args.opset, tolerance=args.tolerance, samples=samples)
    except MeepleError as err:
        # one line: some messages quote a multi-line error of torch's
        print(f"meeple: error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    print(f"exported {loaded.file} (step {loaded.global_step}, model {loaded.model_target}) -> {out}")
    print(f"inputs {loaded.policy.input_names()} -> outputs {loaded.policy.output_names()}; {parity.line()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
