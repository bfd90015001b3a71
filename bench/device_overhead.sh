#!/bin/bash
# On the GPU machine, from the repository root: the console against nvitop under load, with each
# hand-written replacement switched off (GPUFLEET_PLAIN) and an earlier checkout, all in one
# alternation (bench.gpu_overhead, scenario "seven"); the tables into $OUT/overhead.md.
# Installs gpufleet's carried wheels (.real/whl: textual, httpx, nvitop, ...; and the SGLang
# bundle's starlette/uvicorn when .real/sglang-site.tar.xz is there) beside the machine's own
# Python and torch, as device_harness.sh does.
# carry: .real/whl, .real/whl-sim, .real/whl-later (nvitop) and BASE_DIR (e.g. .device/base:
#   mkdir -p .device/base && git archive REV tui | tar -x -C .device/base)
# usage: [DEADLINE_S=400] bash bench/device_overhead.sh BASE_DIR|- RUNS SECONDS [PLAIN ...]
#   defaults: - 2 20 keepalive batch gcfreeze render; PLAIN 'none': no variant
set -u
BASE=${1:--}; RUNS=${2:-2}; WINDOW=${3:-20}; shift $(( $# < 3 ? $# : 3 ))
PLAIN=("$@"); [ ${#PLAIN[@]} -gt 0 ] || PLAIN=(keepalive batch gcfreeze render)
[ "${PLAIN[0]}" = none ] && PLAIN=()  # before/after and nvitop alone (a short call)
PY=/opt/torch/.venv/bin/python3; [ -x "$PY" ] || PY=python3
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
T0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
# starlette/uvicorn/sniffio for the simulator from .real/whl-sim (0.2 MB) where the SGLang bundle
# (52 MiB) is not carried: the bundle, the repository and a base checkout pass the 64 MiB a call
# may carry; nvitop from .real/whl-later when it is not in .real/whl.
WHEELS=(.real/whl/*.whl)
[ -d .real/whl-sim ] && WHEELS+=(.real/whl-sim/*.whl)
ls .real/whl/nvitop-*.whl >/dev/null 2>&1 || WHEELS+=(.real/whl-later/nvitop-*.whl)
[ -d /tmp/gf ] || "$PY" -m pip install -q --no-index --no-deps --no-compile --target /tmp/gf "${WHEELS[@]}" || exit 4
if [ -f .real/sglang-site.tar.xz ] && [ ! -f /tmp/site/.ok ]; then
  mkdir -p /tmp/site
  "$PY" -c 'import tarfile;tarfile.open(".real/sglang-site.tar.xz").extractall("/tmp/site")' && touch /tmp/site/.ok
fi
export PYTHONPATH=$PWD:/tmp/gf:/tmp/site PYTHONUNBUFFERED=1
"$PY" - <<'EOF' || exit 5
import importlib
missing = []
for name in ("textual", "httpx", "psutil", "pynvml", "nvitop", "prometheus_client", "starlette",
             "uvicorn", "torch", "tui.cli"):
    try:
        importlib.import_module(name)
    except ImportError as error:
        missing.append(f"{name} ({error})")
if missing:
    raise SystemExit("missing on this machine: " + "; ".join(missing) + " (add their wheels to .real/whl)")
import textual
print("imports ok, textual", textual.__version__)
EOF
ARGS=(--scenario seven --runs "$RUNS" --seconds "$WINDOW" --warmup 4 --logs /tmp/gpu-overhead --out "$OUT/overhead.md")
for p in "${PLAIN[@]}"; do ARGS+=(--plain "$p"); done
[ "$BASE" = - ] || ARGS+=(--base "$BASE")
echo "setup $(( $(date +%s) - T0 )) s; python -m bench.gpu_overhead ${ARGS[*]}"
timeout -s INT "${DEADLINE_S:-500}" "$PY" -m bench.gpu_overhead "${ARGS[@]}" 2>&1 | tee "$OUT/overhead.log"
echo "bench rc=${PIPESTATUS[0]} after $(( $(date +%s) - T0 )) s"
tail -n 5 /tmp/gpu-overhead/sglang_*.log > "$OUT/servers-tail.txt" 2>/dev/null; ls -la "$OUT"
