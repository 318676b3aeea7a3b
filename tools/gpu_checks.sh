#!/usr/bin/env bash
# The checks that need a CUDA machine, in one run, each step time-boxed and logged (docs/gpu.md):
#   1 tests/gpu                      packed pipeline: bit-identical frames, no host syncs, async streams
#   2 python -m meeple.bench pixels  packed-pixel env / unpack / reward / PPO rows on cuda
#   3 python train.py +experiment=phase3 hardware=<profile>   a short league from scratch at the
#                                    profile's scale (512 tables, 40 x 256, bf16, torch.compile)
#   4 python -m meeple.bench league  league throughput, large network on cuda
#   5 python -m meeple.bench chess_selfplay --device cuda   the default network and the GPU profile's
# Usage: tools/gpu_checks.sh [OUT_DIR] (default outputs/gpu_checks); STEPS="phase3 ..." runs a
# subset, GPU_PROFILE picks the hardware profile (rtx6000), PHASE3_EXTRA adds overrides. A failing step is logged and
# the next one runs; the exit status is the number of failed steps (100: no CUDA here, nothing run).
set -u
# compose_config (the benchmarks) finds conf/ beside an editable install; this checkout's otherwise
export MEEPLE_CONF_DIR=${MEEPLE_CONF_DIR:-$(cd "$(dirname "$0")/.." && pwd)/conf}
OUT=${1:-outputs/gpu_checks}
PROFILE=${GPU_PROFILE:-rtx6000}
STEPS=${STEPS:-tests_gpu bench_pixels phase3 bench_league bench_chess bench_chess_gpu}   # a subset by name
read -r -a PHASE3_EXTRA <<<"${PHASE3_EXTRA:-}"   # more overrides of the phase3 step
mkdir -p "$OUT"
STARTED=$(mktemp)   # the phase3 summary reads only a run written after this
failed=0
step() {  # step NAME SECONDS CMD...: run CMD under a time limit, log to $OUT/NAME.log
    local name=$1 limit=$2
    shift 2
    [[ " $STEPS " == *" $name "* ]] || return 0
    local t0=$SECONDS
    echo "== $name (limit ${limit}s): $*"
    timeout -k 10 "$limit" "$@" >"$OUT/$name.log" 2>&1
    local rc=$?
    echo "== $name: exit $rc in $((SECONDS - t0))s"
    tail -n 25 "$OUT/$name.log"
    [ $rc -eq 0 ] || failed=$((failed + 1))
}

if ! python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    echo "tools/gpu_checks.sh: CUDA is not available here (torch.cuda.is_available() is False); run it on a GPU machine" >&2
    exit 100
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())"

# One process (the GPU tests share one device), and no -n from pyproject's addopts: a bare GPU
# machine may lack pytest-xdist.
step tests_gpu "${T_TESTS:-120}" python -m pytest tests/gpu -v -p no:cacheprovider \
    -o addopts="--import-mode=importlib -ra --strict-markers"
step bench_pixels "${T_PIXELS:-120}" python -m meeple.bench pixels --device cuda --out "$OUT/pixels.json"
# The league from the profile's starting point needs phase 2's student at the profile's scale;
# on a bare machine it starts from scratch (no earlier stage, no gate, no KL to a start policy).
# Two rollouts of 512 tables x 64 steps, a promotion per rollout, a short duplicate at the end.
step phase3 "${T_PHASE3:-300}" python train.py +experiment=phase3 "hardware=$PROFILE" tracking=none \
    'pipeline.order=[league]' pipeline.start=league \
    '~pipeline.stages.phase1' '~pipeline.stages.teacher' '~pipeline.stages.student' \
    'transition@pipeline.stages.league.transition=none' pipeline.stages.league.phase.reference_kl.coef=0 \
    pipeline.stages.league.phase.total_frames=65536 pipeline.stages.league.phase.league.promote_every=1 \
    pipeline.stages.league.phase.eval.every_n_rollouts=2 \
    pipeline.stages.league.phase.callbacks.vs_start.games=8 pipeline.stages.league.phase.callbacks.vs_rule.games=8 \
    "${PHASE3_EXTRA[@]}"
# The league's last metrics and pool, from the newest phase3 run's latest checkpoint.
[[ " $STEPS " == *" phase3 "* ]] && STARTED=$STARTED python - >"$OUT/phase3_summary.txt" 2>&1 <<'PY'
import glob, os, torch
start = os.path.getmtime(os.environ["STARTED"])
runs = sorted((p for p in glob.glob("outputs/runs/*/phase0/checkpoints/latest.pt") if os.path.getmtime(p) > start),
              key=os.path.getmtime)
assert runs, "no league checkpoint written by this run's phase3 step"
c = torch.load(runs[-1], map_location="cpu", weights_only=False)
print(runs[-1], "global_step", c["global_step"])
for k, v in sorted(c["metrics"].items()):
    print(f"{k} = {v}")
lg = c["league"]
print("promotions", lg["promotions"], "games", lg["games"], "ratings", lg["pool"]["ratings"])
PY
[[ " $STEPS " == *" phase3 "* ]] && cat "$OUT/phase3_summary.txt"
step bench_league "${T_LEAGUE:-90}" python -m meeple.bench league --scale large --device cuda --tables 512 \
    --sim-threads 8 --threads 4 --decisions 16384 --pool 3 --out "$OUT/league.json"
step bench_chess "${T_CHESS:-60}" python -m meeple.bench chess_selfplay --device cuda --seconds 20 \
    --out "$OUT/chess_selfplay.json"
# docs/chess.md's GPU profile: a 20 x 256 network, 8 workers x 128 games, batches of 512
step bench_chess_gpu "${T_CHESS:-60}" python -m meeple.bench chess_selfplay --device cuda --seconds 20 \
    --out "$OUT/chess_selfplay_gpu.json" model.channels=256 model.blocks=20 phase.selfplay.num_simulations=200 \
    phase.selfplay.batch_size=512 phase.selfplay.games_per_worker=128 phase.selfplay.num_workers=8
echo "failed steps: $failed"
exit $failed
