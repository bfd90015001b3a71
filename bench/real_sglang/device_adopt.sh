#!/bin/bash
# On the GPU machine (two GPUs: nvidia-h100-x2), from the repository root: issue 35 on the real
# SGLang 0.5.17. Two servers started by a script of the operator's kind (not gpufleet), a client
# keeping 16 /generate in flight on each, `gpufleet adopt`, then the retune from (0.30, 80, 0.4,
# auto) to (0.45, 200, 0.6, 64) with `gpufleet apply` (one GPU at a time); results into $OUT.
# Needs .real/ as for device_harness.sh (sglang-site.tar.xz, jit-cache.tar.xz, whl/).
# usage: bash bench/real_sglang/device_adopt.sh [BUDGET_S]
set -u
BUDGET=${1:-520}
PY=/opt/torch/.venv/bin/python3; [ -x "$PY" ] || PY=python3
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
if [ ! -f /tmp/site/.ok ]; then
  mkdir -p /tmp/site
  "$PY" -c 'import tarfile;tarfile.open(".real/sglang-site.tar.xz").extractall("/tmp/site")' && touch /tmp/site/.ok || exit 3
fi
[ -d /tmp/cache ] || "$PY" -c 'import tarfile;tarfile.open(".real/jit-cache.tar.xz").extractall("/tmp")'
[ -d /tmp/gf ] || "$PY" -m pip install -q --no-index --no-deps --no-compile --target /tmp/gf .real/whl/*.whl || exit 4
export CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export TVM_FFI_CACHE_DIR=/tmp/cache/tvm-ffi TRITON_CACHE_DIR=/tmp/cache/triton
# gpufleet runs from the repository with its carried wheels; the servers get the bundle alone.
export PYTHONPATH=$PWD:/tmp/gf:/tmp/site
"$PY" -c 'import textual, tui.cli; print("gpufleet imports ok")' || exit 5
MODEL=/tmp/tiny; [ -d $MODEL ] || "$PY" bench/real_sglang/make_tiny.py $MODEL qwen35 || exit 6
rm -rf /tmp/aout
timeout -s INT $(( BUDGET + 60 )) "$PY" -m bench.real_sglang.adopt_real /tmp/aout "$MODEL" \
  --python "$PY" --server-pythonpath /tmp/site --gpus 0,1 --ports 30000,30001 --budget "$BUDGET"
echo "adopt_real rc=$?"
tar -C /tmp -cJf "$OUT/adopt.tar.xz" aout
cp /tmp/aout/results.md /tmp/aout/results.json "$OUT/" 2>/dev/null; ls -la "$OUT"
