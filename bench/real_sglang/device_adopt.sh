#!/bin/bash
# On the GPU machine (two GPUs: nvidia-h100-x2), from the repository root: issue 35 on the real
# SGLang 0.5.17. Two servers started by a script of the operator's kind (not gpufleet), a client
# keeping 16 /generate in flight on each, `gpufleet adopt`, then the retune from (0.30, 80, 0.4,
# auto) to (0.45, 200, 0.6, 64) with `gpufleet apply` (one GPU at a time); results into $OUT.
# Needs .real/ as for device_harness.sh (sglang-site.tar.xz, jit-cache.tar.xz, whl/).
# usage: bash bench/real_sglang/device_adopt.sh [BUDGET_S]
set -u
BUDGET=${1:-520}
source bench/real_sglang/device_setup.sh  # PY, OUT, /tmp/site, /tmp/gf, the env, MODEL
rm -rf /tmp/aout
timeout -s INT $(( BUDGET + 60 )) "$PY" -m bench.real_sglang.adopt_real /tmp/aout "$MODEL" \
  --python "$PY" --server-pythonpath /tmp/site --gpus 0,1 --ports 30000,30001 --budget "$BUDGET"
echo "adopt_real rc=$?"
tar -C /tmp -cJf "$OUT/adopt.tar.xz" aout
cp /tmp/aout/results.md /tmp/aout/results.json "$OUT/" 2>/dev/null; ls -la "$OUT"
