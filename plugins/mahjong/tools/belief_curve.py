"""A public deal-in belief's within-decision AUC against the corpus samples it was trained on:
one `belief_probe --out` JSON per checkpoint of a phase-1 run, read as a curve with its 95%
bootstrap band and the defence rules on the same decisions (docs/rl_diagnostics.md, section ac).

    python -m meeple_mahjong.belief_probe --belief RUN/phase0/checkpoints/ckpt_phase0_step00001000.pt \\
        --reference P/gates/phase1.pt --out probes/step00001000.json        # one per checkpoint
    python plugins/mahjong/tools/belief_curve.py "6 x 64=probes/step*.json" --batch 512 --out belief.png

Each JSON's step is read from the checkpoint name it probed (``ckpt_phase<N>_step<NNNNNNNN>.pt``,
:func:`meeple.checkpoint.retention.checkpoint_step`); samples =
step x ``--batch``. Prints the table it draws.
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
from pathlib import Path

from matplotlib.figure import Figure  # no pyplot: no GUI backend, no global state

from meeple.checkpoint.retention import checkpoint_step


def points(pattern: str, batch: int) -> list[tuple[int, dict]]:
    """``(samples, probe result)`` of every JSON matching ``pattern``, by samples."""
    out = []
    for path in sorted(glob.glob(pattern)):
        r = json.loads(Path(path).read_text())
        step = checkpoint_step(Path(r["belief"]))
        if step is None:
            raise SystemExit(f"belief_curve: {path}: its belief {r['belief']} names no step; accepted: a checkpoint ckpt_phase<N>_step<8 digits>.pt")
        if "intervals" not in r:
            raise SystemExit(f"belief_curve: {path} has no bootstrap intervals; accepted: belief_probe --out JSON "
                             "of this version")  # fmt: skip
        out.append((step * batch, r))
    if not out:
        raise SystemExit(f"belief_curve: no JSON matches {pattern}")
    return sorted(out, key=lambda p: p[0])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python plugins/mahjong/tools/belief_curve.py", description=__doc__.split("\n\n")[0])
    p.add_argument("series", nargs="+", help="LABEL=GLOB of belief_probe JSON files")
    p.add_argument("--batch", type=int, default=512, help="samples per optimiser step")
    p.add_argument("--out", type=Path, required=True, help="the PNG")
    a = p.parse_args(argv)
    fig = Figure(figsize=(7, 4), dpi=110, layout="constrained")
    ax = fig.subplots()
    rules = []
    for spec in a.series:
        label, sep, pattern = spec.partition("=")
        if not sep:
            p.error(f"{spec!r}; accepted: LABEL=GLOB")
        pts = points(pattern, a.batch)
        xs = [x for x, _ in pts]
        ys = [r["auc_within"] for _, r in pts]
        lo = [r["intervals"]["belief"][0] for _, r in pts]
        hi = [r["intervals"]["belief"][1] for _, r in pts]
        ax.plot(xs, ys, marker="o", label=label)
        ax.fill_between(xs, lo, hi, alpha=0.2)
        rules += [r["rules_auc_within"] for _, r in pts]
        print(f"{label}: samples, within-decision AUC [95%], rules, belief - rules [95%] (paired), decisions")
        for x, r in pts:
            d = r["intervals"]["belief - rules"]
            print(f"  {x:>9,d}  {r['auc_within']:.3f} [{r['intervals']['belief'][0]:.3f}, {r['intervals']['belief'][1]:.3f}]"
                  f"  {r['rules_auc_within']:.3f}  {r['auc_within'] - r['rules_auc_within']:+.3f} [{d[0]:+.3f}, {d[1]:+.3f}]"
                  f"  {r['choices']}")  # fmt: skip
    ax.axhline(sum(rules) / len(rules), color="grey", linestyle="--", label="defence rules (no learning)")
    ax.set_xscale("log")
    ax.set_xlabel("corpus samples trained on (one pass)")
    ax.set_ylabel("AUC within a decision")
    ax.set_title("public deal-in belief against training data")
    ax.legend()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(a.out)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
