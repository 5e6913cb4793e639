#!/usr/bin/env bash
# SIGKILL robustness: trains a config once without interruption, then again while killing the
# process with SIGKILL at random moments and restarting it with --resume each time, and checks
# that both runs end with byte-identical final checkpoints (parameters, optimizer state, RNG,
# counters: compared through the CRC32 and size that each checkpoint's sidecar records).
#
# Usage: scripts/kill_resume_check.sh BINARY CONFIG WORKDIR KILLS [-- --set k=v ...]
# Exit 0 when identical, 1 otherwise.
set -euo pipefail
bin=$1 config=$2 work=$3 kills=$4
shift 4
[[ ${1:-} == -- ]] && shift
sets=("$@")
rm -rf "$work"; mkdir -p "$work"

"$bin" pretrain --config "$config" --run-dir "$work/straight" "${sets[@]}" >"$work/straight.log" 2>&1

run="$work/killed"
rm -rf "$run"
resume=()
attempt=0
while :; do
  attempt=$((attempt + 1))
  "$bin" pretrain --config "$config" --run-dir "$run" "${resume[@]}" "${sets[@]}" >>"$work/killed.log" 2>&1 &
  pid=$!
  resume=(--resume)
  if (( attempt <= kills )); then
    # A random moment mid-training: after this attempt's next progress line, plus 0 to 1 s.
    before=$(grep -c "\[train\] step" "$run/train.log" 2>/dev/null || true)
    for _ in $(seq 1200); do
      now=$(grep -c "\[train\] step" "$run/train.log" 2>/dev/null || true)
      (( ${now:-0} > ${before:-0} )) || ! kill -0 "$pid" 2>/dev/null && break
      sleep 0.1
    done
    sleep "$(awk -v s="$RANDOM" 'BEGIN { printf "%.2f", (s % 100) / 100 }')"
    if kill -0 "$pid" 2>/dev/null; then
      kill -KILL "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
      echo "attempt $attempt: killed (latest: $(cat "$run/checkpoints/latest" 2>/dev/null || echo none))"
      continue
    fi
  fi
  wait "$pid"
  echo "attempt $attempt: finished"
  break
done

a=$(cat "$work"/straight/checkpoints/latest); b=$(cat "$run"/checkpoints/latest)
ca=$(cat "$work/straight/checkpoints/$a.crc32"); cb=$(cat "$run/checkpoints/$b.crc32")
echo "uninterrupted: $a $ca"
echo "killed+resumed: $b $cb"
[[ "$a" == "$b" && "$ca" == "$cb" ]] && { echo "identical"; exit 0; }
echo "DIFFERENT"; exit 1
