#!/bin/bash
# On the GPU machine, from the repository root: unpack SGLang 0.5.17 (.real/sglang-site.tar.xz)
# and its compiled kernels (.real/jit-cache.tar.xz), install gpufleet's own dependencies from the
# carried wheels (.real/whl), then set gpufleet's latency percentiles and energy of a real server
# under load beside its own /metrics and nvidia-smi (bench/real_sglang/observe.py); results into
# $OUT (observe.md: the rows for bench/results-real-sglang.md).
# usage: bash bench/real_sglang/device_observe.sh [SECONDS] [CLIENTS]
set -u
SECONDS_UNDER_LOAD=${1:-60}; CLIENTS=${2:-12}
source bench/real_sglang/device_setup.sh
nvidia-smi --query-gpu=name,memory.total,driver_version,power.limit --format=csv,noheader
rm -rf /tmp/oout; mkdir -p /tmp/oout
timeout -s INT 540 "$PY" -m bench.real_sglang.observe /tmp/oout "$MODEL" \
  --seconds "$SECONDS_UNDER_LOAD" --clients "$CLIENTS"
echo "observe rc=$?"
cp /tmp/oout/observe.md /tmp/oout/observe.json /tmp/oout/server.log "$OUT/" 2>/dev/null; ls -la "$OUT"
