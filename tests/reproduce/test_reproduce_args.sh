#!/usr/bin/env bash
# The reproduction scripts' command line (scripts/reproduce/lib.sh), by dry runs: one-line
# errors with exit 2 before any work, seeds written as rpe-train writes them (so reruns find
# finished runs), paths taken relative to where the script is started, SQuAD required only
# where it is used, a dry run that creates nothing, and one script at a time in an --out.
# No matplotlib stops the figure scripts before any training (exit 2, how to install it).
# At paper scale the methods default to the paper's ('all' for every registered one).
# A --corpus's shards go under --out, and stamps leave data.shards out; a key newer than a
# stamp is no change at its default.
# A launcher (torchrun) goes before the pretrain/finetune commands only.
# usage: test_reproduce_args.sh RPE_TRAIN SOURCE_DIR
set -euo pipefail
BIN="$(realpath "$1")"
S="$(cd "$2" && pwd)/scripts/reproduce"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cd "$WORK"
mkdir -p sub/dir "corpus dir"
printf 'One sentence here .\nAnother one .\n' >"corpus dir/my corpus.txt"

expect_exit2() {  # expect_exit2 PATTERN ARGS...: exit 2, one stderr line matching PATTERN
  local pattern="$1"; shift
  local err code=0
  err="$(bash "$@" 2>&1 >/dev/null)" || code=$?
  [[ $code -eq 2 ]] || fail "$*: exit $code, not 2: $err"
  [[ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ]] || fail "$*: more than one line: $err"
  [[ "$err" =~ $pattern ]] || fail "$*: '$err' does not match /$pattern/"
}
common=(--rpe-train "$BIN" --out "$WORK/out" --dry-run)
# Paper scale's inputs (the sample data stand in), for dry runs.
paper=(--corpus "corpus dir/my corpus.txt" --squad-dir "$2/data/sample/squad" --glue-dir "$2/data/sample/glue"
  --hf-bert "$WORK" --seeds 1)
expect_exit2 "error: --scale needs a value" "$S/table2.sh" --rpe-train "$BIN" --scale
expect_exit2 "error: --scale must be tiny, mini or paper, got 'bogus'" "$S/table2.sh" --scale bogus "${common[@]}"
expect_exit2 "error: --seeds: 'x' is not a non-negative integer" "$S/table2.sh" --seeds 1,x "${common[@]}"
expect_exit2 "error: --methods m9: .*unknown method 'm9'" "$S/table2.sh" --methods m9 "${common[@]}"
expect_exit2 "error: --scale mini needs --squad-dir" "$S/table2.sh" --scale mini --corpus "corpus dir/my corpus.txt" \
  "${common[@]}"
for script in table2 extrapolation figure4 figure5; do
  bash "$S/$script.sh" --methods m4 "${common[@]}" >/dev/null 2>&1 || fail "$script.sh --dry-run failed"
done
[[ ! -e "$WORK/out" ]] || fail "a dry run created its --out folder: $(find "$WORK/out")"

# Seeds: "01" is seed 1, as rpe-train names it (seed1/); a repeated seed runs once.
log="$(bash "$S/table2.sh" --methods m4 --seeds "01, 2,2" "${common[@]}" 2>&1)"
[[ "$(grep -c -- '--seeds 1 ' <<<"$log")" -eq 1 && "$(grep -c -- '--seeds 2 ' <<<"$log")" -eq 1 ]] ||
  fail "seeds not normalised: $log"
# Relative paths are resolved where the script starts, though the steps run from the checkout;
# a corpus path with spaces stays one file.
log="$(cd sub/dir && bash "$S/table2.sh" --methods m4 --corpus "../../corpus dir/my corpus.txt" "${common[@]}" 2>&1)"
grep -qF "data.train_files=[\"$WORK/sub/dir/../../corpus dir/my corpus.txt\"]" <<<"$log" || fail "corpus path: $log"
# GLUE (Table 3) and the figures need no SQuAD at mini scale.
bash "$S/table3.sh" --scale mini --methods m4 --glue-dir "$WORK" --corpus "corpus dir/my corpus.txt" "${common[@]}" \
  >/dev/null 2>&1 || fail "table3 at mini scale asked for SQuAD"
# One script at a time in an --out: a second one stops before any work.
mkdir -p "$WORK/busy"
(exec 9>>"$WORK/busy/.lock"; flock 9; exec sleep 60) >/dev/null 2>&1 &
holder=$!  # the sleep itself, holding the lock
while flock -n "$WORK/busy/.lock" true; do sleep 0.1; done
expect_exit2 "error: $WORK/busy is in use by another reproduction script" "$S/table2.sh" --rpe-train "$BIN" \
  --out "$WORK/busy" --methods m4
kill "$holder"; wait "$holder" 2>/dev/null || true
[[ ! -e "$WORK/busy/pretrain" ]] || fail "a script behind the lock made run folders"
# No matplotlib: the figure scripts stop at once (exit 2, one line saying how to install it),
# before any training, instead of a traceback after it. A python whose matplotlib fails to import.
mkdir -p nompl/matplotlib
echo 'raise ModuleNotFoundError("No module named matplotlib")' >nompl/matplotlib/__init__.py
printf '#!/bin/sh\nPYTHONPATH=%s exec %s "$@"\n' "$WORK/nompl" "$(command -v python3)" >nompl/python
chmod +x nompl/python
for script in figure4 figure5 extrapolation; do
  expect_exit2 "error: $WORK/nompl/python has no matplotlib.*scripts/install_deps.sh --test" "$S/$script.sh" \
    --rpe-train "$BIN" --out "$WORK/fig" --python "$WORK/nompl/python"
  [[ ! -e "$WORK/fig/pretrain" ]] || fail "$script.sh without matplotlib started training"
done
expect_exit2 "error: python 'no-such-python' not found" "$S/figure5.sh" --python no-such-python "${common[@]}"
# At paper scale (days of a cluster per pretraining) the methods are the paper's Table 2/3 rows
# unless --methods says otherwise ('all': every registered method); below it, every method.
pretrained() { grep -oE "rpe-train pretrain --config [^ ]+" <<<"$1" | sed 's/.*_//; s/\.yaml//' | tr '\n' ' '; }
six="absolute shaw m1 m2 m3 m4 "
all="$(bash "$S/table2.sh" --scale tiny "${common[@]}" 2>&1)"
[[ $(pretrained "$all" | wc -w) == 12 ]] || fail "tiny scale: not every method by default: $(pretrained "$all")"
for script in table2 table3 extrapolation; do
  log="$(bash "$S/$script.sh" --scale paper "${paper[@]}" "${common[@]}" 2>&1)" || fail "$script.sh --scale paper: $log"
  [[ "$(pretrained "$log")" == "$six" ]] || fail "$script.sh --scale paper pretrains $(pretrained "$log"), not $six"
  log="$(bash "$S/$script.sh" --scale paper --methods all "${paper[@]}" "${common[@]}" 2>&1)"
  [[ $(pretrained "$log" | wc -w) == 12 ]] || fail "$script.sh --methods all: $(pretrained "$log")"
done
log="$(bash "$S/table2.sh" --scale tiny --methods m4,paper,alibi "${common[@]}" 2>&1)"
[[ "$(pretrained "$log")" == "m4 absolute shaw m1 m2 m3 alibi " ]] || fail "--methods m4,paper,alibi: $(pretrained "$log")"
# A --corpus's shards are the --out's own, not the preset's shared folder (data/shards/...), which
# another --corpus or --out would rebuild; the preset's own corpus keeps the preset's folder.
log="$(bash "$S/table2.sh" --scale mini --methods m4 "${paper[@]}" "${common[@]}" 2>&1)"
[[ $(grep -cF -- "--set data.shards=$WORK/out/shards/mini " <<<"$log") == 2 ]] ||
  fail "mini --corpus: prepare-data and pretrain do not use <out>/shards/mini: $log"
log="$(bash "$S/table2.sh" --scale mini --methods m4 --squad-dir "$2/data/sample/squad" "${common[@]}" 2>&1)"
! grep -q "data.shards=" <<<"$log" || fail "mini without --corpus moved the preset's shards: $log"
# Where the shards are kept is no setting of a run: a run stamped with the preset's folder is
# reused with <out>/shards; another key still stops the script.
(
  OUT="$WORK/out" RP_ROOT="$2" DRY_RUN=0
  rp_log() { :; }
  rp_die() { echo "error: $*" >&2; exit 2; }
  source "$S/stamps.sh"
  printf 'data.shards: data/shards/mini_wikitext103_uncased\ntrain.lr: 1\n' >"$WORK/run.stamp"
  rp_stamp_check "$WORK/run" "$WORK/run.stamp" "pretrain m4" $'data.shards: <out>/shards/mini\ntrain.lr: 1' ||
    fail "a stamp differing in data.shards only was refused"
  ( rp_stamp_check "$WORK/run" "$WORK/run.stamp" "pretrain m4" $'data.shards: <out>/shards/mini\ntrain.lr: 2' ) 2>"$WORK/err" &&
    fail "a stamp of another train.lr was accepted"
  grep -q "(train.lr: 1 there, train.lr: 2 now)" "$WORK/err" || fail "stamp: $(cat "$WORK/err")"
  # Nor how a job runs: a run stopped at its time limit is resumed by a job with another limit.
  printf 'train.lr: 1\ntrain.threads: 2\ntrain.time_limit_min: 0.0001\n' >"$WORK/run.stamp"
  rp_stamp_check "$WORK/run" "$WORK/run.stamp" "pretrain m4" $'train.lr: 1\ntrain.threads: 0\ntrain.time_limit_min: 1410' ||
    fail "a stamp differing in train.time_limit_min and train.threads only was refused"
  # A key newer than the stamp (model.pre_ln stands in: absent from it) is no change while at its
  # built-in default, and is recorded then; set to another value, it is one.
  printf 'train.lr: 1\n' >"$WORK/run.stamp"
  ( rp_stamp_check "$WORK/run" "$WORK/run.stamp" "pretrain m4" $'model.pre_ln: true\ntrain.lr: 1' ) 2>"$WORK/err" &&
    fail "a stamp without model.pre_ln accepted model.pre_ln: true"
  grep -q "(? there, model.pre_ln: true now)" "$WORK/err" || fail "stamp: $(cat "$WORK/err")"
  rp_stamp_check "$WORK/run" "$WORK/run.stamp" "pretrain m4" $'model.pre_ln: false\ntrain.lr: 1' ||
    fail "a stamp without model.pre_ln refused model.pre_ln at its default"
  [[ "$(cat "$WORK/run.stamp")" == $'model.pre_ln: false\ntrain.lr: 1' ]] || fail "the newer key was not recorded: $(cat "$WORK/run.stamp")"
  if ( rp_stamp_check "$WORK/run" "$WORK/run.stamp" "pretrain m4" $'train.lr: 1' ) 2>/dev/null; then
    fail "a key the stamp names but the settings lack was accepted"
  fi
)
# --launcher / RPE_LAUNCH: put before every pretrain and finetune command, before no other
# (prepare-data, swap-method, inspect, tables run as one process). A stand-in torchrun on PATH.
mkdir -p bin
printf '#!/bin/sh\nexec "$@"\n' >bin/torchrun && chmod +x bin/torchrun
launch="torchrun --no-python --nproc-per-node=8"
check_launched() {  # check_launched WHAT LOG: the training commands launched, the others not
  local trained others
  trained=$(grep -cE "/rpe-train (pretrain|finetune) " <<<"$2" || true)
  [[ $trained -gt 0 && $(grep -cE "\] $launch /[^ ]*/rpe-train (pretrain|finetune) " <<<"$2") == "$trained" ]] ||
    fail "$1: not every pretrain/finetune command is launched: $2"
  others=$(grep -E "/rpe-train (prepare-data|swap-method|import-hf|inspect|tables) " <<<"$2" || true)
  ! grep -q torchrun <<<"$others" || fail "$1: launched a command that is no training: $others"
}
for script in table2 table3 table4 table5 extrapolation figure4; do
  log="$(PATH="$WORK/bin:$PATH" bash "$S/$script.sh" --scale paper --methods absolute,m4 "${paper[@]}" \
    --launcher "$launch" "${common[@]}" 2>&1)" || fail "$script.sh --launcher: $log"
  check_launched "$script.sh" "$log"
done
grep -q "prepare-data " <<<"$log" || fail "paper scale prepares no shards: $log"
log="$(PATH="$WORK/bin:$PATH" RPE_LAUNCH="$launch" bash "$S/table2.sh" --scale paper --methods m4 "${paper[@]}" "${common[@]}" 2>&1)"
check_launched "RPE_LAUNCH" "$log"
# --finetune-launcher: fine-tuning's own (none: one process), e.g. a world size that divides the
# pretraining batch (160) but not fine-tuning's (32).
log="$(PATH="$WORK/bin:$PATH" bash "$S/table2.sh" --scale paper --methods m4 "${paper[@]}" --launcher "$launch" \
  --finetune-launcher none "${common[@]}" 2>&1)"
grep -qE "\] $launch /[^ ]*/rpe-train pretrain " <<<"$log" && grep -qE "\] /[^ ]*/rpe-train finetune squad " <<<"$log" ||
  fail "--finetune-launcher none: $log"
PATH="$WORK/bin:$PATH" expect_exit2 "error: --launcher: torchrun needs --no-python" "$S/table2.sh" \
  --launcher "torchrun --nproc-per-node=8" "${common[@]}"
expect_exit2 "error: --finetune-launcher: program 'no-such-launcher' not found" "$S/table2.sh" \
  --finetune-launcher "no-such-launcher -n 2" "${common[@]}"
echo "reproduce args: OK"
