#!/bin/bash
# On the GPU machine, from the repository root: unpack the SGLang bundle once (.real/), write the
# tiny model, and record the real server scenario by scenario (explore.py) into $OUT.
# usage: bash bench/real_sglang/device_explore.sh TAG SCENARIOS BUDGET_S
set -u
TAG=$1; SCEN=$2; BUDGET=${3:-400}
PY=/opt/torch/.venv/bin/python3; [ -x "$PY" ] || PY=python3
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc
if [ ! -f /tmp/site/.ok ]; then
  t0=$(date +%s); mkdir -p /tmp/site
  "$PY" -c 'import tarfile;tarfile.open(".real/sglang-site.tar.xz").extractall("/tmp/site")' && touch /tmp/site/.ok || exit 3
  echo "unpacked in $(( $(date +%s) - t0 )) s"
fi
if [ -f .real/jit-cache.tar.xz ] && [ ! -d /tmp/cache ]; then
  "$PY" -c 'import tarfile;tarfile.open(".real/jit-cache.tar.xz").extractall("/tmp")'
fi
export CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export TVM_FFI_CACHE_DIR=/tmp/cache/tvm-ffi TRITON_CACHE_DIR=/tmp/cache/triton
"$PY" -c "import importlib.util as u; print('image has:', {m: bool(u.find_spec(m)) for m in ['psutil','httpx','pynvml','prometheus_client','textual','rich','tomli_w','starlette','uvicorn','boto3','aiohttp','sniffio','platformdirs','pygments','markdown_it']})"
export PYTHONPATH=/tmp/site
[ -d /tmp/tiny ] || "$PY" bench/real_sglang/make_tiny.py /tmp/tiny qwen35
timeout $(( BUDGET + 150 )) "$PY" bench/real_sglang/explore.py /tmp/x-$TAG /tmp/tiny "$SCEN" --budget "$BUDGET"
tar -C /tmp -cJf "$OUT/explore-$TAG.tar.xz" "x-$TAG"
[ -f "$OUT/../jit-done" ] || tar -C /tmp -cJf "$OUT/jit-cache.tar.xz" cache 2>/dev/null
ls -la "$OUT"
