#!/usr/bin/env bash
# SIGKILL robustness: trains a config once without interruption, then again while killing the
# process with SIGKILL at random moments and restarting it with --resume each time, and checks
# that both runs end with bitwise identical final checkpoints' model parameters, optimizer state
# and RNG (compared through the checkpoint's stored CRC32 of the whole file, which covers every
# tensor; the config, step and version inside are equal by construction).
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
    # a random moment: 0.3 to 2.3 s into this attempt
    sleep "$(awk -v s="$RANDOM" 'BEGIN { printf "%.2f", 0.3 + (s % 200) / 100 }')"
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
