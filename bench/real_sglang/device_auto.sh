#!/bin/bash
# On the GPU machine, from the repository root: sglang_version = "auto" against the real SGLang
# 0.5.17 (bench/real_sglang/auto_check.py): the preflight at the two settings (26 capped,
# then 64 uncapped), and with "launch" the real server started and retuned to them by gpufleet.
# The setup is device_setup.sh's: the servers get the bundle from the profile's [env]
# PYTHONPATH (SERVER_PYTHONPATH), which is what the auto probe is run with (the profile's [env]
# over gpufleet's own environment); results into $OUT.
# usage: bash bench/real_sglang/device_auto.sh [launch] [DEADLINE_S]
set -u
MODE=${1:-preflight}; DEADLINE=${2:-420}
source bench/real_sglang/device_setup.sh  # PY, OUT, MODEL; the bundle, wheels, tiny model
ARGS=(); [ "$MODE" = launch ] && ARGS=(--launch)
rm -rf /tmp/aout
timeout -s INT "$DEADLINE" "$PY" -m bench.real_sglang.auto_check /tmp/aout "$MODEL" "${ARGS[@]}"
echo "auto_check rc=$?"
tar -C /tmp -cJf "$OUT/auto.tar.xz" --exclude='*.sqlite3*' aout
cp /tmp/aout/results.md /tmp/aout/results.json "$OUT/" 2>/dev/null; ls -la "$OUT"
