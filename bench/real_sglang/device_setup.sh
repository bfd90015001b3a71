# Sourced by the device_*.sh scripts on the GPU machine, from the repository root: unpack SGLang
# 0.5.17 (.real/sglang-site.tar.xz) and its compiled kernels (.real/jit-cache.tar.xz), install
# gpufleet's own dependencies from the carried wheels (.real/whl), export the environment, write
# the tiny model. Sets PY, OUT and MODEL; exits 3-6 when a step fails.
PY=/opt/torch/.venv/bin/python3; [ -x "$PY" ] || PY=python3
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
if [ ! -f /tmp/site/.ok ]; then
  mkdir -p /tmp/site
  "$PY" -c 'import tarfile;tarfile.open(".real/sglang-site.tar.xz").extractall("/tmp/site")' && touch /tmp/site/.ok || exit 3
fi
[ -d /tmp/cache ] || { [ -f .real/jit-cache.tar.xz ] && "$PY" -c 'import tarfile;tarfile.open(".real/jit-cache.tar.xz").extractall("/tmp")'; }
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
