#!/bin/bash
# On the GPU machine (ONE GPU: an H100 or an H200), from the repository root: issue 35 on the
# real SGLang 0.5.17 with both servers on card 0. A script of the operator's kind (not gpufleet)
# starts them at fractions 0.30 then 0.60 (each of what the card has left), a client keeps 16
# /generate in flight on each, `gpufleet adopt`, the preflight under sglang_version = "auto",
# the retune from (0.30, 80, 0.4, auto) to (0.45, 200, 0.6, 64) walked one slot at a time
# (each drain's deadline DRAIN_S), then one server SIGKILLed under the console; results in $OUT:
# results.md, results.json, adopt.tar.xz (every log and the state), nvidia-smi.txt.
# Needs .real/ as for device_harness.sh (sglang-site.tar.xz, jit-cache.tar.xz, whl/ with pyte).
# usage: bash bench/real_sglang/device_adopt.sh [BUDGET_S] [DRAIN_S] [job]
set -u
BUDGET=${1:-360}; DRAIN=${2:-30}; JOB=(); [ "${3:-}" = job ] && JOB=(--job)
source bench/real_sglang/device_setup.sh  # PY, OUT, /tmp/site, /tmp/gf, the env, MODEL
rm -rf /tmp/aout
timeout -s INT $(( BUDGET + 45 )) "$PY" -m bench.real_sglang.adopt_real /tmp/aout "$MODEL" \
  --python "$PY" --server-pythonpath /tmp/site --ports 30000,30001 --device 0 \
  --drain-s "$DRAIN" --budget "$BUDGET" "${JOB[@]}"
echo "adopt_real rc=$?"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
tar -C /tmp -cJf "$OUT/adopt.tar.xz" --exclude='*.sqlite3*' aout
cp /tmp/aout/results.md /tmp/aout/results.json "$OUT/" 2>/dev/null; ls -la "$OUT"
