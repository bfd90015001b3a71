#!/usr/bin/env bash
# The seed's manual retune, scripted: kill the running servers, relaunch all seven with setsid,
# then its readiness loop (5 s polls of /model_info; GPU 0's log checked for errors).
# Usage: seed_retune.sh LOGDIR PIDS PORTS -- SERVER ARGV...  (PIDS, PORTS: comma-separated;
# the server argv is run as given with --port P appended, CUDA_VISIBLE_DEVICES set per GPU.)
logdir=$1; IFS=, read -r -a pids <<< "$2"; IFS=, read -r -a ports <<< "$3"; shift 4
for pid in "${pids[@]}"; do kill -9 -- "-$pid" 2>/dev/null; done
for i in "${!ports[@]}"; do
  CUDA_VISIBLE_DEVICES=$i setsid "$@" --port "${ports[$i]}" > "$logdir/sglang_gpu$i.log" 2>&1 &
done
for attempt in $(seq 1 60); do
  sleep 5
  READY=0
  for port in "${ports[@]}"; do
    curl -s "http://localhost:$port/model_info" > /dev/null 2>&1 && READY=$((READY+1))
  done
  if [ $READY -eq ${#ports[@]} ]; then echo "ALL READY ($((attempt*5))s)"; exit 0; fi
  if grep -q "Not enough memory\|RuntimeError" "$logdir/sglang_gpu0.log" 2>/dev/null; then
    echo "FAILED"; exit 1
  fi
done
exit 1
