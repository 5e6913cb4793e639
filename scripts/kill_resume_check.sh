#!/usr/bin/env bash
# Kill robustness: trains a config once without interruption, then again while killing the
# process at random moments and restarting it with --resume each time, and checks that both runs
# end alike:
#   - byte-identical final checkpoints (parameters, optimizer state, RNG, counters, checksum);
#   - metrics.jsonl and summary.json equal except their timing and memory fields
#     (elapsed_s, tokens_per_s, model_tflops_per_device; wall_s, train_s, peak_rss_bytes, peak_device_bytes).
# --signal TERM (or HUP, USR1; not INT, which a script's background job ignores) sends that
# signal instead of SIGKILL: a stop on request, which must lose no step (each stop's checkpoint is
# the step train.log says it stopped after, no earlier than the last step logged before the
# signal, and the process ends by the signal); at least one must land in the training loop.
#
# Usage: scripts/kill_resume_check.sh [--signal SIG] BINARY CONFIG WORKDIR KILLS [-- --set k=v ...]
# Exit 0 when identical, 1 otherwise (the differing lines are printed).
set -euo pipefail
sig=KILL
if [[ ${1:-} == --signal ]]; then sig=$2; shift 2; fi
bin=$1 config=$2 work=$3 kills=$4
shift 4
[[ ${1:-} == -- ]] && shift
sets=("$@")
rm -rf "$work"; mkdir -p "$work"

"$bin" pretrain --config "$config" --run-dir "$work/straight" "${sets[@]}" >"$work/straight.log" 2>&1

run="$work/killed"
rm -rf "$run"
resume=()
attempt=0 stops=0 status=0
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
      logged=$(grep -o "\[train\] step [0-9]*" "$run/train.log" 2>/dev/null | tail -n 1 | grep -o "[0-9]*$" || true)
      kill -"$sig" "$pid" 2>/dev/null || true
      code=0
      wait "$pid" 2>/dev/null || code=$?
      latest=$(cat "$run/checkpoints/latest" 2>/dev/null || echo none)
      # It may have finished between the check above and the signal.
      if (( code == 0 )) && [[ -e $run/summary.json ]]; then echo "attempt $attempt: finished"; break; fi
      echo "attempt $attempt: SIG$sig, exit $code (latest: $latest)"
      [[ $sig == KILL ]] && continue
      if (( code != 128 + $(kill -l "$sig") )); then
        echo "SIG$sig: exit code $code, not the signal's $((128 + $(kill -l "$sig")))"; status=1
      fi
      # Outside the training loop (data, final evaluation) the signal acts as usual: no line.
      stopped=$(grep -o "stopped on request (SIG$sig) after step [0-9]*" "$run/train.log" | tail -n 1 || true)
      if [[ -n $stopped ]] && (( $(grep -c "stopped on request" "$run/train.log") > stops )); then
        stops=$((stops + 1))
        printf -v want "step_%08d.pt" "${stopped##* }"
        [[ $latest == "$want" ]] || { echo "$stopped, but the newest checkpoint is $latest"; status=1; }
        (( ${stopped##* } >= ${logged:-0} )) || { echo "$stopped, but step $logged was logged before the signal"; status=1; }
      fi
      continue
    fi
  fi
  wait "$pid"
  echo "attempt $attempt: finished"
  break
done

# Timing and memory values differ from run to run; everything else must not.
untimed_metrics() { sed -E 's/"(elapsed_s|tokens_per_s|model_tflops_per_device)":[^,}]*/"\1":-/g' "$1"; }
untimed_summary() { sed -E 's/^( *"(wall_s|train_s|peak_rss_bytes|peak_device_bytes)"): [^,]*/\1: -/' "$1"; }

if [[ $sig != KILL ]] && (( stops == 0 )); then
  echo "no SIG$sig landed in the training loop (a faster machine than this check was sized for?)"; status=1
fi
a=$(cat "$work"/straight/checkpoints/latest); b=$(cat "$run"/checkpoints/latest)
echo "uninterrupted: $a $(cksum <"$work/straight/checkpoints/$a")"
echo "killed+resumed: $b $(cksum <"$run/checkpoints/$b")"
if [[ "$a" != "$b" ]] || ! cmp -s "$work/straight/checkpoints/$a" "$run/checkpoints/$b"; then
  echo "final checkpoints DIFFERENT"; status=1
fi
if ! diff <(untimed_metrics "$work/straight/metrics.jsonl") <(untimed_metrics "$run/metrics.jsonl"); then
  echo "metrics.jsonl DIFFERENT (lines above: < uninterrupted, > killed+resumed)"; status=1
fi
if ! diff <(untimed_summary "$work/straight/summary.json") <(untimed_summary "$run/summary.json"); then
  echo "summary.json DIFFERENT (lines above: < uninterrupted, > killed+resumed)"; status=1
fi
(( status == 0 )) && echo "identical (checkpoint, metrics.jsonl, summary.json)"
exit $status
