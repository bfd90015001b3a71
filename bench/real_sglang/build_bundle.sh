#!/bin/bash
# Build sglang-site.tar.xz: SGLang 0.5.17 and what it imports beyond the GPU machine's own Python
# (3.12, torch 2.11.0+cu130, triton, transformers, nvcc 13.0), installed into one folder, pruned,
# xz-compressed: ~54 MiB. Run on a machine that reaches PyPI. Usage: build_bundle.sh OUTDIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); out=${1:?OUTDIR}; mkdir -p "$out"; cd "$out"
P="--python-version 3.12 --implementation cp --only-binary=:all: --platform manylinux_2_34_x86_64
   --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_26_x86_64
   --platform manylinux_2_24_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64
   --platform manylinux1_x86_64 --platform manylinux_2_5_x86_64"
python3 -m pip download -q --no-deps -d whl $P -r "$here/requirements-0.5.17.txt"
rm -rf site && python3 -m pip install -q --no-deps --no-index --no-compile --target site $P whl/*.whl
cd site
# FlashAttention-3 (1.1 GB unpacked), Blackwell kernels and a static library nothing loads:
# the server then needs --attention-backend triton (serve.sh passes it).
rm -f sgl_kernel/flash_ops.abi3.so sgl_kernel/infllm_ops.cpython-310-x86_64-linux-gnu.so xgrammar/lib/libxgrammar.a
rm -rf sgl_kernel/sm100 bin flashinfer/data/cutlass/{examples,python,test,docs,media} \
  flashinfer/data/cccl/{python,benchmarks,docs,ci,examples,test,c2h}
find . -name __pycache__ -prune -exec rm -rf {} +
cd .. && tar -C site -cf - . | xz -T0 -9 > sglang-site.tar.xz && ls -la sglang-site.tar.xz
cp "$here"/make_tiny.py .
