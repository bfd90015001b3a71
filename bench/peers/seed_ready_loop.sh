#!/usr/bin/env bash
# The seed's readiness loop (message 7646): every 5 s, curl /model_info on each port; stop when
# all answer, or when GPU 0's log shows an error. Changed only to take the log and the ports as
# arguments and to print when each port first answered ("READY <port> <epoch seconds>"), so the
# benchmark can compare per server.
# Usage: seed_ready_loop.sh GPU0_LOG PORT...
log=$1
shift
ports=("$@")
declare -A seen
for attempt in $(seq 1 60); do
  sleep 5
  READY=0
  for port in "${ports[@]}"; do
    if curl -s "http://localhost:$port/model_info" > /dev/null 2>&1; then
      READY=$((READY+1))
      if [ -z "${seen[$port]}" ]; then
        seen[$port]=1
        echo "READY $port $(date +%s.%N)"
      fi
    fi
  done
  if [ $READY -eq ${#ports[@]} ]; then
    echo "ALL READY ($((attempt*5))s)"
    grep -E "Mamba Cache|KV Cache|max_total_num|max_running" "$log" | tail -4
    break
  fi
  if grep -q "Not enough memory\|RuntimeError" "$log" 2>/dev/null; then
    echo "FAILED:"
    grep "Not enough\|RuntimeError" "$log" | head -2
    break
  fi
  if [ $((attempt%6)) -eq 0 ]; then echo "Loading ($((attempt*5))s)..."; fi
done
