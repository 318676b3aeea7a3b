"""The curves of a branched PPO run (+experiment=phase1_branch) from its checkpoints' metrics:
in-run evaluation against the start's rank, KL to phase 1 and per update, the branched decisions'
statistics, and PPO's GAE advantage against the branched one (docs/rl_diagnostics.md, section o).
Keep every rollout's checkpoint (checkpoint.min_interval_s=0 checkpoint.keep=200):

    python tools/branch_curves.py outputs/runs/<run> 2.570 docs/rl_diagnostics/goal1_branch.png
"""

import argparse
import glob

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
p.add_argument("run", help="the run directory (its phase1/checkpoints)")
p.add_argument("gate_rank", type=float, help="the start's rank on the in-run walls (a dashed line)")
p.add_argument("out", help="PNG to write")
a = p.parse_args()
run, gate_rank, out = a.run, a.gate_rank, a.out
files = sorted(glob.glob(run + "/phase1/checkpoints/ckpt_*.pt"))
R, M = [], []
for f in files:
    ck = torch.load(f, map_location="cpu", weights_only=False)
    R.append(int(ck["epoch"]) + 1)
    M.append(ck["metrics"])
R = np.array(R)


def series(k):
    return np.array([float(m.get(k, np.nan)) for m in M])


def smooth(x, w=10):
    return np.array([np.nanmean(x[max(0, i - w + 1) : i + 1]) for i in range(len(x))])


fig, ax = plt.subplots(2, 2, figsize=(11, 7))
ev = [
    (
        r,
        float(m["eval/avg_rank"]),
        float(m["eval/avg_rank_ci_low"]),
        float(m["eval/avg_rank_ci_high"]),
    )
    for r, m in zip(R, M)
    if "eval/avg_rank" in m
]
seen = {}
for e in ev:
    seen[e[1]] = seen.get(
        e[1], e
    )  # the metric repeats until the next evaluation: first rollout it appears
ev = sorted(seen.values())
a = ax[0, 0]
a.errorbar(
    [e[0] for e in ev],
    [e[1] for e in ev],
    yerr=[[e[1] - e[2] for e in ev], [e[3] - e[1] for e in ev]],
    fmt="o-",
    capsize=3,
    label="run",
)
a.axhline(gate_rank, color="gray", ls="--", label=f"phase-1 gate ({gate_rank:.3f})")
a.set_title("vs 3 rule bots, 200 indices (seed 1000); lower is better")
a.set_xlabel("rollout")
a.legend()
PANELS = {  # (axes, title): [(metric, label), ...], each a 10-rollout moving mean
    (ax[0, 1], "KL (10-rollout mean)"): [
        ("loss/reference_kl", "KL to phase 1"),
        ("train/kl_approx", "KL per update"),
    ],
    (ax[1, 0], "branched decisions (10-rollout mean)"): [
        ("branch/best_mass", "mass on the best candidate"),
        ("branch/tie_fraction", "tie fraction"),
        ("branch/clip_fraction", "surrogate clip fraction"),
    ],
    (ax[1, 1], "PPO's signal vs the branches' (10-rollout mean)"): [
        ("branch/gae_corr", "corr(GAE adv., branched adv.)"),
        ("branch/advantage_taken_std", "sd of branched adv. (taken)"),
        ("branch/gae_std_branched", "sd of GAE adv. (same decisions)"),
    ],
}
for (a, title), lines in PANELS.items():
    for key, label in lines:
        a.plot(R, smooth(series(key)), label=label)
    a.set_title(title)
    a.set_xlabel("rollout")
    a.legend()
fig.suptitle("phase1_branch: PPO from the phase-1 gate on branched action values vs 3 rule bots")
fig.tight_layout()
fig.savefig(out, dpi=90)
print("wrote", out)
