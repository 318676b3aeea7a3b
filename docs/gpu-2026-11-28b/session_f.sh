#!/usr/bin/env bash
# 2026-11-28 (f): close the chess constructor crash question (native built against the image's
# nanobind vs nanobind 3.1.0 from PyPI), then tools/gpu_checks.sh's tests and a full phase3 step.
set -u
export PYTHONUNBUFFERED=1 PIP_NO_INDEX=1 PIP_CONFIG_FILE=/dev/null PIP_ROOT_USER_ACTION=ignore PIP_BREAK_SYSTEM_PACKAGES=1
export MEEPLE_CONF_DIR=$PWD/conf
T0=$SECONDS
el() { echo "[+$((SECONDS - T0))s] $*"; }
chess() {  # chess LABEL DEVICE
    timeout -k 5 60 python3 -m meeple.bench chess_selfplay --device "$2" --seconds 5 --out "/tmp/chess_$1.json" \
        >"/tmp/chess_$1.log" 2>&1
    local rc=$?
    el "chess $1 on $2: exit $rc"
    tail -n 4 "/tmp/chess_$1.log"
    [ -f "/tmp/chess_$1.json" ] && python3 -c "import json; d=json.load(open('/tmp/chess_$1.json')); print({k: v for k, v in d.items() if not isinstance(v, (dict, list))})"
}
nbver() { python3 -c "import nanobind; print('nanobind', nanobind.__version__, nanobind.__file__)"; }
el "compilers: $(command -v c++ g++ clang++ | tr '\n' ' ')"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
bash .gpuenv/setup.sh || { el "setup failed"; exit 1; }
el "A: native as setup.sh built it"; nbver
chess A cpu
chess A cuda
if command -v c++ >/dev/null || command -v g++ >/dev/null; then
    python3 -m pip install -q --no-deps .gpuenv/nb/nanobind-3.1.0-py3-none-any.whl
    python3 -m pip install -q --no-build-isolation --no-deps --force-reinstall ./native
    el "B: native rebuilt against PyPI nanobind"; nbver
    chess B cpu
    chess B cuda
fi
el "gpu_checks"
T_TESTS=90 T_PHASE3=240 STEPS="tests_gpu phase3" bash tools/gpu_checks.sh "$OUT/gpu"
el "done"
