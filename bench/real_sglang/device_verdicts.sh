#!/bin/bash
# On the GPU machine, from the repository root: unpack SGLang 0.5.17 (.real/sglang-site.tar.xz)
# and its compiled kernels (.real/jit-cache.tar.xz: without it the first start compiles for
# ~75 s more and the run may not fit), install gpufleet's own dependencies from the carried
# wheels (.real/whl), write the tiny model, then run the verdicts harness in ONE call: the grid
# measured directly, the autotune, the canary, on two real servers sharing the one GPU
# (bench/real_sglang/verdicts_real.py); results into $OUT.
# usage: bash bench/real_sglang/device_verdicts.sh [DEADLINE_S] [CLIENTS]
set -u
DEADLINE=${1:-490}; CLIENTS=${2:-64}
PY=/opt/torch/.venv/bin/python3; [ -x "$PY" ] || PY=python3
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
T0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
if [ ! -f /tmp/site/.ok ]; then
  mkdir -p /tmp/site
  "$PY" -c 'import tarfile;tarfile.open(".real/sglang-site.tar.xz").extractall("/tmp/site")' && touch /tmp/site/.ok || exit 3
fi
[ -d /tmp/cache ] || { [ -f .real/jit-cache.tar.xz ] && "$PY" -c 'import tarfile;tarfile.open(".real/jit-cache.tar.xz").extractall("/tmp")'; }
[ -d /tmp/gf ] || "$PY" -m pip install -q --no-index --no-deps --no-compile --target /tmp/gf .real/whl/*.whl || exit 4
export CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export TVM_FFI_CACHE_DIR=/tmp/cache/tvm-ffi TRITON_CACHE_DIR=/tmp/cache/triton
export PYTHONPATH=$PWD:/tmp/gf:/tmp/site SERVER_PYTHONPATH=/tmp/site
"$PY" -c 'import textual, tui.cli; print("gpufleet imports ok, textual", textual.__version__)' || exit 5
MODEL=/tmp/tiny; [ -d $MODEL ] || "$PY" bench/real_sglang/make_tiny.py $MODEL qwen35 || exit 6
rm -rf /tmp/vout; mkdir -p /tmp/vout
LEFT=$(( DEADLINE - ($(date +%s) - T0) ))
echo "setup $(( $(date +%s) - T0 )) s; the harness gets $LEFT s"
timeout -s INT $(( LEFT + 60 )) "$PY" -m bench.real_sglang.verdicts_real /tmp/vout "$MODEL" \
  --deadline-s "$LEFT" --clients "$CLIENTS"
echo "verdicts rc=$? in $(( $(date +%s) - T0 )) s"
cp /tmp/vout/results.json /tmp/vout/results.md "$OUT/" 2>/dev/null
tar -C /tmp -cJf "$OUT/verdicts-state.tar.xz" --exclude='*.sqlite3*' vout/state vout/profiles vout/client-*.json 2>/dev/null
ls -la "$OUT"
