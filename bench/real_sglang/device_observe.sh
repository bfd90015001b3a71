#!/bin/bash
# On the GPU machine, from the repository root: unpack SGLang 0.5.17 (.real/sglang-site.tar.xz)
# and its compiled kernels (.real/jit-cache.tar.xz), install gpufleet's own dependencies from the
# carried wheels (.real/whl), then set gpufleet's latency percentiles and energy of a real server
# under load beside its own /metrics and nvidia-smi (bench/real_sglang/observe.py); results into
# $OUT (observe.md: the rows for bench/results-real-sglang.md).
# usage: bash bench/real_sglang/device_observe.sh [SECONDS] [CLIENTS]
set -u
SECONDS_UNDER_LOAD=${1:-60}; CLIENTS=${2:-12}
PY=/opt/torch/.venv/bin/python3; [ -x "$PY" ] || PY=python3
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version,power.limit --format=csv,noheader
if [ ! -f /tmp/site/.ok ]; then
  mkdir -p /tmp/site
  "$PY" -c 'import tarfile;tarfile.open(".real/sglang-site.tar.xz").extractall("/tmp/site")' && touch /tmp/site/.ok || exit 3
fi
[ -d /tmp/cache ] || "$PY" -c 'import tarfile;tarfile.open(".real/jit-cache.tar.xz").extractall("/tmp")'
[ -d /tmp/gf ] || "$PY" -m pip install -q --no-index --no-deps --no-compile --target /tmp/gf .real/whl/*.whl || exit 4
export CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export TVM_FFI_CACHE_DIR=/tmp/cache/tvm-ffi TRITON_CACHE_DIR=/tmp/cache/triton
export PYTHONPATH=$PWD:/tmp/gf:/tmp/site SERVER_PYTHONPATH=/tmp/site
MODEL=/tmp/tiny; [ -d $MODEL ] || "$PY" bench/real_sglang/make_tiny.py $MODEL qwen35 || exit 6
rm -rf /tmp/oout; mkdir -p /tmp/oout
timeout -s INT 540 "$PY" -m bench.real_sglang.observe /tmp/oout "$MODEL" \
  --seconds "$SECONDS_UNDER_LOAD" --clients "$CLIENTS"
echo "observe rc=$?"
cp /tmp/oout/observe.md /tmp/oout/observe.json /tmp/oout/server.log "$OUT/" 2>/dev/null; ls -la "$OUT"
