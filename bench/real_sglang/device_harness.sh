#!/bin/bash
# On the GPU machine, from the repository root: unpack SGLang 0.5.17 (.real/sglang-site.tar.xz)
# and its compiled kernels (.real/jit-cache.tar.xz), install gpufleet's own dependencies from the
# carried wheels (.real/whl), run the GPU tests and then the harness (gpufleet against the real
# server) in what is left of DEADLINE_S; results into $OUT.
# usage: bash bench/real_sglang/device_harness.sh SETTINGS BUDGET_S GPU_TESTS_TIMEOUT_S
set -u
SETTINGS=${1:-all}; BUDGET=${2:-400}; GPU_T=${3:-180}
source bench/real_sglang/device_setup.sh  # PY, OUT, MODEL; the bundle, wheels, tiny model
"$PY" -c 'import pyte' || exit 5
rm -rf /tmp/hout; mkdir -p /tmp/hout
# The GPU tests first (bounded), then the harness in what is left of DEADLINE_S (one call).
T0=$(date +%s); DEADLINE=${DEADLINE_S:-560}
if [ "$GPU_T" -gt 0 ]; then
  timeout "$GPU_T" "$PY" -m pytest -q -p no:cacheprovider -p no:xdist -m gpu tests/core/test_gpu_*.py --timeout 150 > /tmp/hout/pytest-gpu.txt 2>&1
  echo "gpu tests rc=$? in $(( $(date +%s) - T0 )) s"; tail -15 /tmp/hout/pytest-gpu.txt
fi
LEFT=$(( DEADLINE - ($(date +%s) - T0) ))
ARGS=(); [ "$SETTINGS" = all ] || ARGS=(--settings "$SETTINGS")
[ "$BUDGET" -gt $(( LEFT - 120 )) ] && BUDGET=$(( LEFT - 120 ))
# HARNESS: which harness runs (bench.real_sglang.drain_harness: the drain and crash of issue 35)
timeout -s INT "$LEFT" "$PY" -m "${HARNESS:-bench.real_sglang.harness}" /tmp/hout "$MODEL" "${ARGS[@]}" --budget "$BUDGET"
echo "harness rc=$? (budget $BUDGET s of $LEFT s left)"
tar -C /tmp -cJf "$OUT/harness.tar.xz" --exclude='*.sqlite3*' hout
cp /tmp/hout/results.md /tmp/hout/drain.md /tmp/hout/drain.json /tmp/hout/pytest-gpu.txt "$OUT/" 2>/dev/null; ls -la "$OUT"
