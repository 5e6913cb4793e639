#!/usr/bin/env bash
# One call on a GPU machine lent by the call (docs/gpu.md): runs a step of the GPU check under a
# time limit, then, whatever became of it (failure and time-out included), packs what the call
# wrote or changed into one archive: the reports, the logs, and the state a rerun continues from
# (the plan, finished runs' summaries, results and metrics, the tokenizer) -- without
# checkpoints, shards, saved models, unpacked data or other bulk, and without what was carried
# in and left as it was (this side has it). Such a machine is released when idle for seconds,
# so nothing left on it can be counted on: unpack every call's archive in the repository root
# here, in the order of the calls, and carry the run folders into the next call.
#
# The archive is also rewritten every --refresh seconds while COMMAND runs, and COMMAND's output
# goes to step.log beside it as it comes: a call the machine itself cuts short (its device time
# spent before --limit; what is under $OUT then comes back as it is) still brings back the last
# archive and the whole log, not an empty folder.
#
# Usage: scripts/gpu_call.sh [--limit SECONDS] [--refresh SECONDS] [--to FILE] [--pack PATH]... -- COMMAND [ARGS...]
#   --limit  seconds COMMAND may run (default 540: a call is cut at 600; this leaves the packing
#            and the transfer time); after it COMMAND and its children are stopped (status 124)
#   --refresh  seconds between two archives while COMMAND runs (default 60; 0: only at the end)
#   --to     the archive (default $OUT/results.tgz, $OUT being the folder a call brings back)
#   --pack   a path to pack, relative to the current folder; repeatable. Default: what the GPU
#            scripts write: bench/results/gpu_*.md, gpu_run_*, table2_mini_*, table2_run_*, and
#            the build's logs build-gpu.*.log (those that exist), of their files only those this
#            call wrote or changed: a report carried in unchanged (the checkout's own copy) would
#            otherwise, unpacked here, overwrite a newer one from an earlier call
# Exits with COMMAND's status; 2 for bad arguments.
set -uo pipefail
LIMIT=540 REFRESH=60 TO="" PACK=()
usage() { echo "usage: $0 [--limit SECONDS] [--refresh SECONDS] [--to FILE] [--pack PATH]... -- COMMAND [ARGS...]" >&2; exit 2; }
while (($#)); do
  case $1 in
    --limit) [[ ${2:-} =~ ^[0-9]+$ ]] || { echo "$0: --limit takes whole seconds, got '${2:-}'" >&2; exit 2; }
      LIMIT=$2; shift 2 ;;
    --refresh) [[ ${2:-} =~ ^[0-9]+$ ]] || { echo "$0: --refresh takes whole seconds, got '${2:-}'" >&2; exit 2; }
      REFRESH=$2; shift 2 ;;
    --to) [[ -n ${2:-} ]] || usage; TO=$2; shift 2 ;;
    --pack) [[ -n ${2:-} ]] || usage; PACK+=("$2"); shift 2 ;;
    --) shift; break ;;
    *) usage ;;
  esac
done
(($#)) || usage
if [[ -z $TO ]]; then
  [[ -n ${OUT:-} ]] || { echo "$0: no --to FILE and no \$OUT to put results.tgz in" >&2; exit 2; }
  TO=$OUT/results.tgz
fi
mkdir -p "$(dirname "$TO")" || exit 2

DEFAULT_PACK=$((${#PACK[@]} == 0))
# Files changed after this stamp was made were written by this call (the carry came before it).
SINCE=$(mktemp) || exit 1
trap 'rm -f "$SINCE"' EXIT
# pack [quiet]: the archive of what exists now, through a temporary file (a failed or partial
# pack leaves the previous archive). Bulk stays behind: checkpoints and saved models (a mini one
# is ~130 MB with its optimizer, past the next call's 64 MiB carry, so a run cut off here starts
# over there: gpu_table2.sh's refresh_pretraining), shards and unpacked SQuAD (remade from the
# carried data), the HF baseline's site-packages.
pack() {
  if ((DEFAULT_PACK)); then
    shopt -s nullglob
    PACK=(bench/results/gpu_*.md bench/results/gpu_run_* bench/results/table2_mini_* bench/results/table2_run_*
          build-gpu.*.log)
    shopt -u nullglob
  fi
  present=()
  for p in "${PACK[@]}"; do [[ -e $p ]] && present+=("$p"); done
  local members=(-T /dev/null) newer=()  # an empty archive when nothing was written (a failed first step)
  ((${#present[@]})) && members=(-- "${present[@]}")
  ((DEFAULT_PACK)) && newer=(--newer-mtime="$SINCE")  # an absolute path: tar reads that file's mtime
  tar czf "$TO.tmp" "${newer[@]}" --exclude=checkpoints --exclude=model --exclude='*.pt' --exclude='*.safetensors' \
      --exclude=shards --exclude=squad --exclude=hf-site --exclude=corpus.txt --exclude=nbest_predictions.json \
      "${members[@]}" 2>"$TO.err" && mv "$TO.tmp" "$TO" && { rm -f "$TO.err"; return 0; }
  [[ ${1:-} == quiet ]] || cat "$TO.err" >&2
  rm -f "$TO.tmp" "$TO.err"
  return 1
}

# timeout signals COMMAND's whole process group (the scripts' rpe-train children too); the tees
# are this shell's children, outside that group, and end when COMMAND's output does.
LOG=$(dirname "$TO")/step.log
: >"$LOG"
timeout --kill-after=15 "$LIMIT" "$@" > >(tee -a "$LOG") 2> >(tee -a "$LOG" >&2) &
step=$!
waited=0
while kill -0 "$step" 2>/dev/null; do
  sleep 1
  ((++waited, REFRESH > 0 && waited % REFRESH == 0)) && pack quiet  # files being written: the next one
done
wait "$step"
status=$?
((status == 124)) && echo "[gpu_call] stopped after the ${LIMIT} s limit (gpu_table2.sh continues where it stopped when the same call is run again)" >&2

if ! pack; then
  echo "[gpu_call] packing the results into $TO failed" >&2
  exit $((status ? status : 1))
fi
files=$(tar tzf "$TO" | grep -vc '/$' || true)  # the files archived (the default pack skips unchanged ones)
echo "[gpu_call] exit $status; packed $files file(s) under ${#present[@]} path(s) into $TO ($(du -h "$TO" | cut -f1)):" \
     "unpack with tar xzf in the repository root" >&2
exit "$status"
