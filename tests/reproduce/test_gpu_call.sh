#!/usr/bin/env bash
# ctest gpu_call: scripts/gpu_call.sh, one call on a machine lent by the call (docs/gpu.md).
# The step's exit status comes through (3, a clean stop; 124 after the limit, its children
# stopped too), the archive is made whatever the status, holds the state the call wrote but not
# the bulk (checkpoints, shards, saved models, unpacked SQuAD) nor files carried in unchanged,
# and bad arguments are refused (exit 2).
# Usage: test_gpu_call.sh REPO
set -euo pipefail
call=$(cd "$1" && pwd)/scripts/gpu_call.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }
status() { set +e; "$@" >"$work/out" 2>"$work/err"; echo $?; set -e; }  # the exit status of a command

# A run folder as the GPU scripts leave it, written by the step (staged here, copied in by it):
# only what the call wrote or changed is packed. A report and a run's file carried in unchanged
# (older) stay out: unpacked here, they would overwrite a newer copy from an earlier call.
r=bench/results/table2_run_dev
mkdir -p bench/results/table2_run_old staged/$r/reproduce/pretrain/m4/checkpoints staged/$r/reproduce/finetune/table2/m4_s1/seed1/model \
  staged/$r/shards staged/$r/squad
echo "# carried" >bench/results/gpu_carried.md
echo '{"steps": 4}' >bench/results/table2_run_old/plan.json
touch -d '1 hour ago' bench/results/gpu_carried.md bench/results/table2_run_old/plan.json
echo '{"steps": 8}' >staged/$r/plan.json
echo '{"steps": 8}' >staged/$r/reproduce/pretrain/m4/summary.json
echo '{"step": 1}' >staged/$r/reproduce/pretrain/m4/metrics.jsonl
head -c 4096 /dev/zero >staged/$r/reproduce/pretrain/m4/checkpoints/step_00000008.pt
echo '{"f1": 1}' >staged/$r/reproduce/finetune/table2/m4_s1/seed1/results.json
head -c 4096 /dev/zero >staged/$r/reproduce/finetune/table2/m4_s1/seed1/model/model.pt
: >staged/$r/shards/train_00000.bin
: >staged/$r/squad/train-v1.1.json
echo "# report" >staged/bench/results/gpu_dev.md

[[ $(OUT=$work/out1 status "$call" -- bash -c 'cp -r staged/bench . && echo step; exit 3') == 3 ]] || fail "exit 3 did not come through: $(cat err)"
tar tzf out1/results.tgz >list
for f in $r/plan.json $r/reproduce/pretrain/m4/summary.json $r/reproduce/pretrain/m4/metrics.jsonl \
  $r/reproduce/finetune/table2/m4_s1/seed1/results.json bench/results/gpu_dev.md; do
  grep -qx "$f" list || fail "$f not packed: $(cat list)"
done
! grep -E "checkpoints|\.pt$|shards|squad|/model/" list || fail "bulk packed"
! grep -E "gpu_carried.md|table2_run_old/plan.json" list || fail "files carried in unchanged packed: $(cat list)"
! grep "^tar:" err || fail "tar said something: $(cat err)"
n=$(grep -vc '/$' list)
grep -q "packed $n file(s) under" err || fail "the count is not of the $n files archived: $(grep packed err)"

# After the limit: status 124, the step's children stopped, the archive made all the same.
[[ $(status "$call" --limit 1 --to out2/r.tgz -- bash -c 'echo "# cut" >bench/results/gpu_cut.md; sleep 4141 & sleep 4141; wait') == 124 ]] \
  || fail "no 124 after the limit: $(cat err)"
for _ in 1 2 3 4 5; do pgrep -f "sleep 4141" >/dev/null || break; sleep 1; done  # signalled, gone soon
! pgrep -fa "sleep 4141" || fail "the step's children outlived the limit"
grep -q "stopped after the 1 s limit" err || fail "the limit was not reported: $(cat err)"
tar tzf out2/r.tgz >list2  # (not piped into grep -q: tar could die of SIGPIPE, failing the pipeline)
grep -qx bench/results/gpu_cut.md list2 || fail "no archive after the limit: $(cat list2)"
! grep -qx $r/plan.json list2 || fail "the archive after the limit holds the earlier call's plan, unchanged since"

# Cut short from outside (the machine's own limit, before --limit): the archive of the last
# refresh and the step's whole log are there all the same.
setsid "$call" --refresh 1 --to out4/r.tgz -- bash -c 'echo "# late" >bench/results/gpu_late.md; echo step-said; sleep 4242' \
  >/dev/null 2>&1 &
leader=$!
for _ in $(seq 50); do tar tzf out4/r.tgz 2>/dev/null | grep -qx bench/results/gpu_late.md && break; sleep 0.2; done
{ kill -9 -- -"$leader"; wait "$leader"; } 2>/dev/null || true
pkill -9 -f "sleep 4242" || true  # timeout runs the step in a process group of its own
tar tzf out4/r.tgz >list4 || fail "no archive left by the refresh"
grep -qx bench/results/gpu_late.md list4 || fail "the refreshed archive misses the step's file: $(cat list4)"
grep -qx step-said out4/step.log || fail "no step.log beside the archive"

# Nothing to pack (a step that failed before writing anything): an empty archive.
[[ $(status "$call" --to out3/r.tgz --pack nothing -- false) == 1 ]] || fail "exit 1 did not come through"
[[ -f out3/r.tgz && -z $(tar tzf out3/r.tgz) ]] || fail "no empty archive"

for bad in "--limit x -- true" "--refresh -1 -- true" "--to" "-- " "--pack"; do
  # shellcheck disable=SC2086
  [[ $(env -u OUT "$call" $bad 2>/dev/null; echo $?) == 2 ]] || fail "'$bad' not refused with 2"
done
[[ $(env -u OUT "$call" -- true 2>&1 >/dev/null; echo " $?") == *"no \$OUT"*" 2" ]] || fail "no \$OUT not refused"
echo "gpu_call: status, limit and packing as documented"
