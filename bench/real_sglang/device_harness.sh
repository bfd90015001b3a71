#!/bin/bash
# On the GPU machine, from the repository root: unpack SGLang 0.5.17 (.real/sglang-site.tar.xz)
# and its compiled kernels (.real/jit-cache.tar.xz), install gpufleet's own dependencies from the
# carried wheels (.real/whl), run the GPU tests and then the harness (gpufleet against the real
# server) in what is left of DEADLINE_S; results into $OUT.
# usage: bash bench/real_sglang/device_harness.sh SETTINGS BUDGET_S GPU_TESTS_TIMEOUT_S
set -u
SETTINGS=${1:-all}; BUDGET=${2:-400}; GPU_T=${3:-180}
PY=/opt/torch/.venv/bin/python3; [ -x "$PY" ] || PY=python3
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
if [ ! -f /tmp/site/.ok ]; then
  mkdir -p /tmp/site
  "$PY" -c 'import tarfile;tarfile.open(".real/sglang-site.tar.xz").extractall("/tmp/site")' && touch /tmp/site/.ok || exit 3
fi
[ -d /tmp/cache ] || "$PY" -c 'import tarfile;tarfile.open(".real/jit-cache.tar.xz").extractall("/tmp")'
[ -d /tmp/gf ] || "$PY" -m pip install -q --no-index --no-deps --no-compile --target /tmp/gf .real/whl/*.whl || exit 4
export CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export TVM_FFI_CACHE_DIR=/tmp/cache/tvm-ffi TRITON_CACHE_DIR=/tmp/cache/triton
# gpufleet: the repository, its carried dependencies, then the bundle (starlette, uvicorn, sniffio
# for the simulator); the servers get the bundle alone (SERVER_PYTHONPATH).
export PYTHONPATH=$PWD:/tmp/gf:/tmp/site SERVER_PYTHONPATH=/tmp/site
"$PY" -c 'import textual, tui.cli, pyte; print("gpufleet imports ok, textual", textual.__version__)' || exit 5
# the tiny model with its tokenizer (the fixture holds its config.json alone)
MODEL=/tmp/tiny; [ -d $MODEL ] || "$PY" bench/real_sglang/make_tiny.py $MODEL qwen35 || exit 6
cmp -s $MODEL/config.json tests/fixtures/real_sglang/0.5.17/model/config.json || echo "WARNING: the tiny model differs from the recorded one"
rm -rf /tmp/hout; mkdir -p /tmp/hout
# The GPU tests first (bounded), then the harness in what is left of DEADLINE_S (one call).
T0=$(date +%s); DEADLINE=${DEADLINE_S:-560}
if [ "$GPU_T" -gt 0 ]; then
  timeout "$GPU_T" "$PY" -m pytest -q -p no:cacheprovider -p no:xdist -m gpu tests/test_gpu_*.py --timeout 150 > /tmp/hout/pytest-gpu.txt 2>&1
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
