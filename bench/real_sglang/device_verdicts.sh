#!/bin/bash
# On the GPU machine, from the repository root: the bundle, its kernels, the wheels and the tiny
# model (device_setup.sh: carry .real/jit-cache.tar.xz, or the first start compiles for ~75 s
# more and the run may not fit), then the verdicts harness in ONE call: the grid measured
# directly, the autotune, the canary, on two real servers sharing the one GPU
# (bench/real_sglang/verdicts_real.py); results into $OUT.
# usage: bash bench/real_sglang/device_verdicts.sh [DEADLINE_S] [CLIENTS] [PHASES]
#   PHASES: autotune,canary (default; 490 s), or canary alone (330 s: the grid's two settings
#   and the canary). The results are copied into $OUT as each phase ends, so a call cut short
#   by the device's time still brings back what was measured.
set -u
DEADLINE=${1:-490}; CLIENTS=${2:-64}; PHASES=${3:-autotune,canary}
T0=$(date +%s)
source bench/real_sglang/device_setup.sh
rm -rf /tmp/vout; mkdir -p /tmp/vout
LEFT=$(( DEADLINE - ($(date +%s) - T0) ))
echo "setup $(( $(date +%s) - T0 )) s; the harness gets $LEFT s"
( while sleep 10; do cp /tmp/vout/results.json /tmp/vout/results.md "$OUT/" 2>/dev/null; done ) &
COPIER=$!
timeout -s INT $(( LEFT + 60 )) "$PY" -m bench.real_sglang.verdicts_real /tmp/vout "$MODEL" \
  --deadline-s "$LEFT" --clients "$CLIENTS" --phases "$PHASES"
kill $COPIER
echo "verdicts rc=$? in $(( $(date +%s) - T0 )) s"
cp /tmp/vout/results.json /tmp/vout/results.md "$OUT/" 2>/dev/null
tar -C /tmp -cJf "$OUT/verdicts.tar.xz" --exclude='*.sqlite3*' vout
ls -la "$OUT"
