#!/usr/bin/env bash
# 2026-11-28 (f3): chess with set_fen parsed without iostreams, native built by the machine's GCC 13.
set -u
export PYTHONUNBUFFERED=1 PIP_NO_INDEX=1 PIP_CONFIG_FILE=/dev/null PIP_ROOT_USER_ACTION=ignore PIP_BREAK_SYSTEM_PACKAGES=1
export MEEPLE_CONF_DIR=$PWD/conf
T0=$SECONDS
el() { echo "[+$((SECONDS - T0))s] $*"; }
bash .gpuenv/setup.sh >/tmp/setup.log 2>&1 || { tail /tmp/setup.log; exit 1; }
el "setup (native built here by $(g++ --version | head -1))"
python3 -c "import torch, meeple_native._core; print(sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libstdc++' in l}))"
for dev in cpu cuda; do
  timeout -k 5 45 python3 -X faulthandler -m meeple.bench chess_selfplay --device $dev --seconds 5 --out /tmp/c_$dev.json >/tmp/c_$dev.log 2>&1
  el "chess on $dev: exit $?"; grep -v "^\s*$" /tmp/c_$dev.log | tail -n 4
done
timeout -k 5 60 python3 -m pytest -q -p no:cacheprovider -o addopts="--import-mode=importlib" tests/native/test_chess_perft.py tests/native/test_chess_encoding.py 2>&1 | tail -n 3
el done
