#!/usr/bin/env bash
# 2026-11-28 (f2): which build of meeple_native crashes chess on this machine, and where.
set -u
export PYTHONUNBUFFERED=1 PIP_NO_INDEX=1 PIP_CONFIG_FILE=/dev/null PIP_ROOT_USER_ACTION=ignore PIP_BREAK_SYSTEM_PACKAGES=1
export MEEPLE_CONF_DIR=$PWD/conf
T0=$SECONDS
el() { echo "[+$((SECONDS - T0))s] $*"; }
chess() {  # chess LABEL
    timeout -k 5 45 python3 -X faulthandler -m meeple.bench chess_selfplay --device cpu --seconds 3 \
        --out "/tmp/chess_$1.json" >"/tmp/chess_$1.log" 2>&1
    el "chess $1: exit $?"
    grep -v "^\s*$" "/tmp/chess_$1.log" | tail -n 25
}
build() {  # build TYPE [EXTRA pip args]
    local t=$1; shift
    python3 -m pip install -q --no-build-isolation --no-deps --force-reinstall \
        --config-settings=cmake.build-type="$t" "$@" ./native && el "built native $t $*"
}
g++ --version | head -1; python3 -c "import sys; print(sys.version)"; ldd --version | head -1
GPUENV_PREBUILT_NATIVE=1 bash .gpuenv/setup.sh >/tmp/setup.log 2>&1 || { tail /tmp/setup.log; exit 1; }
el "setup with the wheel built on the dev machine (GCC 12.2, Debian)"
chess devwheel
build Debug; chess debug_O0
build RelWithDebInfo; chess relwithdebinfo_O2
build Release --config-settings=cmake.define.CMAKE_CXX_FLAGS=-g; chess release_O3_g
el "native backtrace of the Release (-O3 -g) build"
timeout -k 5 90 cuda-gdb -batch -ex run -ex bt -ex "info sharedlibrary meeple" \
    --args python3 -m meeple.bench chess_selfplay --device cpu --seconds 3 --out /tmp/c.json 2>&1 \
    | grep -v "^\[New Thread\|^\[Thread .* exited\|^$" | tail -n 40
el done
