#!/bin/bash
# On the GPU machine, from the repository root: the bundle, its kernels, the wheels and the tiny
# model (device_setup.sh: carry .real/jit-cache.tar.xz, or the first start compiles for ~75 s
# more and the run may not fit), then the verdicts harness in ONE call: the grid measured
# directly, the autotune, the canary, on two real servers sharing the one GPU
# (bench/real_sglang/verdicts_real.py); results into $OUT.
# usage: bash bench/real_sglang/device_verdicts.sh [DEADLINE_S] [CLIENTS]
set -u
DEADLINE=${1:-490}; CLIENTS=${2:-64}
T0=$(date +%s)
source bench/real_sglang/device_setup.sh
rm -rf /tmp/vout; mkdir -p /tmp/vout
LEFT=$(( DEADLINE - ($(date +%s) - T0) ))
echo "setup $(( $(date +%s) - T0 )) s; the harness gets $LEFT s"
timeout -s INT $(( LEFT + 60 )) "$PY" -m bench.real_sglang.verdicts_real /tmp/vout "$MODEL" \
  --deadline-s "$LEFT" --clients "$CLIENTS"
echo "verdicts rc=$? in $(( $(date +%s) - T0 )) s"
cp /tmp/vout/results.json /tmp/vout/results.md "$OUT/" 2>/dev/null
tar -C /tmp -cJf "$OUT/verdicts.tar.xz" --exclude='*.sqlite3*' vout
ls -la "$OUT"
