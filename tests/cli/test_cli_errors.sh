#!/usr/bin/env bash
# End-to-end CLI checks: user errors are one line on stderr with exit code 2; the
# happy paths (--version, dump-config, a few pretraining steps) work.
set -u
BIN="$1"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
TMP="$(mktemp -d)"
trap 'umount "$TMP/full" 2>/dev/null; rm -rf "$TMP"' EXIT
fail=0

# expect_error NAME PATTERN CMD...: exit code 2, exactly one stderr line matching PATTERN.
expect_error() {
  local name="$1" pattern="$2"; shift 2
  "$@" >"$TMP/out" 2>"$TMP/err"
  local code=$? lines
  lines=$(grep -c '' "$TMP/err")
  if [ "$code" -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -qE -- "$pattern" "$TMP/err"; then
    echo "FAIL $name: exit $code, $lines stderr line(s):"; cat "$TMP/err"; fail=1
  else
    echo "ok   $name: $(cat "$TMP/err")"
  fi
}

CFG=configs/pretrain/tiny_m4.yaml
expect_error "typo in a key" "train.max_stpes: unknown key" "$BIN" pretrain --config $CFG --set train.max_stpes=5
expect_error "wrong type" "model.hidden: expected an integer, got 'big'" "$BIN" pretrain --config $CFG --set model.hidden=big
expect_error "missing config file" "config file not found: nope.yaml" "$BIN" pretrain --config nope.yaml
expect_error "unknown method" "unknown method 'm7' \(valid: .*absolute.*m4" "$BIN" pretrain --config $CFG --set model.attention.method=m7
expect_error "heads do not divide hidden" "^error: --set model.heads=3: model.heads: hidden \(128\) is not divisible by heads \(3\) \(model.hidden from configs/[a-z_./]+\.yaml:[0-9]+\)$" "$BIN" dump-config --config $CFG --set model.heads=3
# A rule between two keys names where each came from: here both from --set.
expect_error "two keys, two origins" "^error: --set train.grad_accum=3: train.grad_accum: batch_size \(8\) is not divisible by grad_accum \(train.batch_size from --set train.batch_size=8\)$" \
  "$BIN" dump-config --config $CFG --set train.batch_size=8 --set train.grad_accum=3
# ... and says so when the other key kept its default (fp16_init_scale is in no preset).
expect_error "the other key at its default" "^error: --set train.min_loss_scale=1e9: train.min_loss_scale: must be positive and at most train.fp16_init_scale \(train.fp16_init_scale at its default\)$" \
  "$BIN" dump-config --config $CFG --set train.min_loss_scale=1e9
expect_error "missing corpus file" "missing.txt: file not found" "$BIN" pretrain --config $CFG --set "data.train_files=[$TMP/missing.txt]" --run-dir "$TMP/r0"
printf 'ok\n\xff\xfe bad\n' > "$TMP/bad.txt"
expect_error "invalid UTF-8" "bad.txt: invalid UTF-8 at byte offset 3" "$BIN" pretrain --config $CFG --set "data.train_files=[$TMP/bad.txt]" --run-dir "$TMP/r1"
expect_error "unknown flag" "" "$BIN" pretrain --config $CFG --bogus
expect_error "unknown preset method" "config file not found: tiny_m9.yaml \(looked in \., configs/pretrain, configs/finetune" "$BIN" dump-config --config tiny_m9.yaml
expect_error "unknown method name" "unknown method 'm9'" "$BIN" methods --names absolute m9
expect_error "paper table without a row list" "--paper-table: 4 not in" "$BIN" methods --names --paper-table 4
expect_error "paper table without --names" "read with --names only" "$BIN" methods --paper-table 2

# Happy paths.
"$BIN" --version | grep -q "^rpe-train " || { echo "FAIL --version"; fail=1; }
# A batch the world size does not divide stops each rank before the rendezvous (the paper's 160
# on 64 GPUs): not after the whole job has met, nor one rank waiting at the store for the others.
expect_error "batch over the world size" "train.batch_size \(160\) is not divisible by grad_accum x world size \(1 x 64\)" \
  env WORLD_SIZE=64 RANK=5 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=9 timeout 60 "$BIN" pretrain --config $CFG \
  --set train.batch_size=160 --set train.device=cpu --run-dir "$TMP/r_world"
# The task is the subcommand's (and --task's): a --set of it would silently win over --task.
expect_error "task by --set" "^error: --set finetune.task=mrpc: the task is named by" \
  "$BIN" finetune glue --task rte --init none --set finetune.task=mrpc --run-dir "$TMP/r_task"
expect_error "the whole finetune section by --set" "^error: --set finetune=3: set the section's keys one by one" \
  "$BIN" finetune squad --init none --set finetune=3 --run-dir "$TMP/r_task"
# Every error line is text: a control character or a byte that is not UTF-8 is shown as \xNN
# (CLI11's own messages too).
expect_error "an argument with a control byte and a non-UTF-8 byte" "not expected: --bogus\\\\x01\\\\xff" \
  "$BIN" pretrain --config $CFG $'--bogus\x01\xff'
# An unknown --task is named as typed, not as the --set finetune.task=... it becomes inside.
expect_error "an unknown --task" '^error: --task \\xff: unknown GLUE task \(valid: cola, sst2, .*wnli\)$' \
  "$BIN" finetune glue --task $'\xff' --init none --run-dir "$TMP/r_task"
expect_error "an empty --task" '^error: --task: empty: expected one of cola, sst2, .*wnli$' \
  "$BIN" finetune glue --task "" --init none --run-dir "$TMP/r_task"
# A task where the subcommand goes: the command, its choices and what it got (CLI11 alone says
# "A subcommand is required").
# An --out ending in '/' names a folder: refused before the model is read and the inputs scored
# (it failed as the predictions were written, and left the folder made for them).
expect_error "predict --out naming a folder" "^error: --out $TMP/pred5/: names a folder, expected a file name\$" \
  "$BIN" predict squad --model "$TMP/no-model" --input "$TMP/no-input.json" --out "$TMP/pred5/"
[ -e "$TMP/pred5" ] && { echo "FAIL predict --out naming a folder: $TMP/pred5 was made"; fail=1; }
expect_error "a task for predict's subcommand" '^error: rpe-train predict: name one of squad or glue \(`rpe-train predict --help`\), got .mrpc.$' \
  "$BIN" predict mrpc
# A command rpe-train does not know: said so, with the nearest command when it is a typo (CLI11
# alone says "The following argument was not expected").
expect_error "a misspelt command" "^error: rpe-train: no command 'pretrian'; did you mean 'pretrain'\\? \\(commands: pretrain, dump-config, .*evaluate-squad, methods; \`rpe-train --help\`\\)$" \
  "$BIN" pretrian --config $CFG
expect_error "an unknown command" "^error: rpe-train: no command 'bogus' \\(commands: pretrain, " "$BIN" bogus
expect_error "finetune without its subcommand" '^error: rpe-train finetune: name one of squad or glue \(`rpe-train finetune --help`\)$' \
  "$BIN" finetune
expect_error "task by a --set of its section" "^error: --set finetune=\{task: mrpc\}: the task is named by" \
  "$BIN" finetune squad --init none --set 'finetune={task: mrpc}' --run-dir "$TMP/r_task"
expect_error "empty --seeds" "--seeds: empty: expected comma-separated integers" \
  "$BIN" finetune glue --task rte --init none --seeds "" --run-dir "$TMP/r_seeds"
# Half a torchrun environment (a stray export) is not taken for one process; nor is a rank of
# more than 64 bits taken for the largest one.
expect_error "half a torchrun environment" "^error: environment variable WORLD_SIZE is set but RANK is not" \
  env -u RANK WORLD_SIZE=2 "$BIN" pretrain --config $CFG --set train.device=cpu --run-dir "$TMP/r_half"
expect_error "a rank beyond 64 bits" "WORLD_SIZE='99999999999999999999' is not a non-negative integer of 64 bits" \
  env WORLD_SIZE=99999999999999999999 RANK=0 "$BIN" pretrain --config $CFG --set train.device=cpu --run-dir "$TMP/r_big"
# CUDA graphs with several ranks are refused before the ranks meet (no rendezvous to wait in:
# MASTER_PORT 9 has no store, and the line comes at once), not after every rank has loaded its data.
expect_error "cuda graphs with several ranks" "^error: train.cuda_graphs: one process outside a process group only" \
  env WORLD_SIZE=2 RANK=1 LOCAL_RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=9 timeout 60 "$BIN" pretrain --config $CFG \
  --set train.device=cuda --set train.cuda_graphs=true --run-dir "$TMP/r_graphs"
# The CUDA kernels' off switch: a misspelt name stops at start-up; a valid one is reported.
expect_error "unknown CUDA kernel name" "^error: RPE_TRAIN_DISABLE_CUDA_KERNELS: unknown kernel 'addnorm' \(known: all, add_norm, m3, relative_layout\)$" \
  env RPE_TRAIN_DISABLE_CUDA_KERNELS=m3,addnorm "$BIN" dump-config --config $CFG
RPE_TRAIN_DISABLE_CUDA_KERNELS=all "$BIN" --version | grep -qx "turned off by RPE_TRAIN_DISABLE_CUDA_KERNELS: add_norm, m3, relative_layout" ||
  { echo "FAIL --version with RPE_TRAIN_DISABLE_CUDA_KERNELS=all"; fail=1; }
"$BIN" dump-config --config $CFG --set train.max_steps=9 | grep -q "max_steps: 9" || { echo "FAIL dump-config"; fail=1; }
# The card's names, from the repository root: presets by name, the paper's method4 for m4.
"$BIN" dump-config --config base_method4.yaml >"$TMP/base4" &&
  "$BIN" dump-config --config configs/pretrain/base_m4.yaml | cmp -s - "$TMP/base4" &&
  grep -q "method: m4" "$TMP/base4" && grep -q "name: base_m4" "$TMP/base4" ||
  { echo "FAIL dump-config --config base_method4.yaml"; fail=1; }
[ "$("$BIN" methods --names | head -1)" = absolute ] && [ "$("$BIN" methods --names method4)" = m4 ] &&
  "$BIN" methods | grep -q "options: model.attention.max_relative" || { echo "FAIL methods"; fail=1; }
# The paper's Tables 2 and 3 report absolute, Shaw et al. and methods 1-4 (Huang et al. 2020).
[ "$("$BIN" methods --names --paper-table 2 | paste -sd' ')" = "absolute shaw m1 m2 m3 m4" ] &&
  [ "$("$BIN" methods --names --paper-table 3 rope method4 | paste -sd' ')" = "m4" ] ||
  { echo "FAIL methods --paper-table"; fail=1; }
# Settings files for scripts as bash assignments (scripts/reproduce/lib.sh reads configs/reproduce/).
"$BIN" dump-config --shell --config configs/reproduce/tiny.yaml | grep -qx "K_LIST=('2' '4' '8' '16' '32' '64' '127')" ||
  { echo "FAIL dump-config --shell"; fail=1; }
if "$BIN" pretrain --config tiny_method4.yaml --set train.max_steps=3 --set train.log_every=1 --set train.eval_batches=1 \
    --set model.layers=1 --run-dir "$TMP/run" >"$TMP/out" 2>"$TMP/err"; then
  [ "$(grep -c '"step"' "$TMP/run/metrics.jsonl")" -ge 3 ] || { echo "FAIL metrics.jsonl rows"; fail=1; }
  echo "ok   pretrain 3 steps"
else
  echo "FAIL pretrain 3 steps"; cat "$TMP/err"; fail=1
fi
# An existing run folder is never overwritten silently.
expect_error "existing run folder" "already exists: pass --resume .*--overwrite .*, or --run-dir DIR for a new run beside it" "$BIN" pretrain --config $CFG --run-dir "$TMP/run"
# A run's config.yaml names no tokenizer file (the run's own tokenizer.model is pretraining's
# default): tokenize finds it beside the config.
if a=$(echo "the cat sat" | "$BIN" tokenize --config "$TMP/run/config.yaml") &&
   b=$(echo "the cat sat" | "$BIN" tokenize --model "$TMP/run/tokenizer.model" --tokenizer sentencepiece) &&
   [ -n "$a" ] && [ "$a" = "$b" ]; then echo "ok   tokenize --config RUN/config.yaml"
else echo "FAIL tokenize --config RUN/config.yaml: '$a' vs '$b'"; fail=1; fi
# --run-dir "" (an unset shell variable) would train into the default folder instead.
expect_error "empty --run-dir" "^error: --run-dir: empty: name a folder" "$BIN" pretrain --config $CFG --run-dir ""
# Nor is anything else a command reads or keeps: inspect's outputs over a checkpoint, an input
# or into checkpoints/; finetune's results lines appended to a file that holds no results.
ckpt=$(ls "$TMP/run/checkpoints/"step_*.pt | head -1)
cp "$ckpt" "$TMP/ckpt_before"
expect_error "inspect over a checkpoint" "^error: --position-weights .*step_[0-9]*\.pt: expected a \.json or \.npy file name$" \
  "$BIN" inspect "$TMP/run" --position-weights "$ckpt"
expect_error "inspect over its eval file" "^error: --mlm-loss $TMP/e.json: is an input of this command" \
  "$BIN" inspect "$TMP/run" --mlm-loss "$TMP/e.json" --eval-file "$TMP/./e.json"
expect_error "inspect into checkpoints/" "inside the run's checkpoints folder" \
  "$BIN" inspect "$TMP/run" --position-weights "$TMP/run/checkpoints/w.json"
expect_error "results lines into a checkpoint" "^error: finetune.results_file .*step_[0-9]*\.pt: not a results file" \
  "$BIN" finetune squad --config configs/finetune/tiny_squad.yaml --init "$TMP/run" --run-dir "$TMP/ft_res" \
  --set "finetune.results_file=$ckpt" --set train.device=cpu
cmp -s "$ckpt" "$TMP/ckpt_before" && [ ! -e "$TMP/ft_res" ] || { echo "FAIL a refused results_file changed something"; fail=1; }
# Fine-tuning from random weights (--init none) reads no pretraining corpus, so needs no
# data.train_files; its result rows have no pretraining length, and the tables no paper numbers.
printf 'extends: [%s, %s]\n' "$ROOT/configs/finetune/tiny_squad.yaml" "$ROOT/configs/model/tiny.yaml" > "$TMP/scratch.yaml"
if "$BIN" finetune squad --config "$TMP/scratch.yaml" --init none --run-dir "$TMP/ft_scratch" \
    --set "data.tokenizer_model=$TMP/run/tokenizer.model" --set finetune.max_train_examples=8 \
    --set finetune.max_eval_examples=8 --set finetune.epochs=1 --set finetune.max_seq_len=48 --set finetune.doc_stride=24 \
    --set model.layers=1 --set model.attention.method=absolute --set train.device=cpu \
    --set "finetune.results_file=$TMP/scratch.jsonl" >"$TMP/out" 2>"$TMP/err" &&
  "$BIN" tables --results "$TMP/scratch.jsonl" --out "$TMP/scratch_tables" >/dev/null 2>&1 &&
  grep -q '"pretrain_max_len":0' "$TMP/scratch.jsonl" && grep -q '"pretrain_run":""' "$TMP/scratch.jsonl" &&
  grep -qE '^\| absolute \| — \| — \| 48 \| \(random init\) \| [0-9.]+ \(dev [0-9]+ of 10570\) \| — \|' "$TMP/scratch_tables/tables.md"; then
  echo "ok   finetune --init none"
else
  echo "FAIL finetune --init none"; cat "$TMP/err" "$TMP/scratch.jsonl" "$TMP/scratch_tables/tables.md" 2>/dev/null; fail=1
fi
# Inputs that are FIFOs are refused by name, not opened (an open blocks until a writer comes;
# `timeout` turns such a hang into a failure here).
mkfifo "$TMP/fifo"
expect_error "corpus FIFO" "cannot read $TMP/fifo: a FIFO \(named pipe\), not a regular file" timeout 60 "$BIN" pretrain \
  --config $CFG --set "data.train_files=[$TMP/fifo]" --run-dir "$TMP/rf1"
expect_error "tokenizer FIFO" "cannot read $TMP/fifo: a FIFO" timeout 60 "$BIN" pretrain --config $CFG \
  --set "data.tokenizer_model=$TMP/fifo" --run-dir "$TMP/rf2"
expect_error "wordpiece FIFO" "cannot read $TMP/fifo: a FIFO" timeout 60 "$BIN" pretrain --config $CFG \
  --set data.tokenizer=wordpiece --set "data.tokenizer_model=$TMP/fifo" --run-dir "$TMP/rf3"
expect_error "results FIFO" "cannot read $TMP/fifo: a FIFO" timeout 60 "$BIN" tables --results "$TMP/fifo" --out "$TMP/tf"
expect_error "inspect --text-file FIFO" "--text-file: cannot read $TMP/fifo: a FIFO" timeout 60 "$BIN" inspect "$TMP/run" \
  --attention "$TMP/att.json" --text-file "$TMP/fifo"
expect_error "inspect --text and --text-file" "^error: --text and --text-file: give one$" "$BIN" inspect "$TMP/run" \
  --attention "$TMP/att.json" --text "a b" --text-file "$TMP/fifo"
# An --out no folder or file can be made in, which the up-front check cannot see (root may write
# in /proc by access(2), yet mkdir and open fail there): the flag named, exit 2 (it was a raw
# "filesystem error: cannot create directories" naming no flag). Tables 2-4 and a subcommand.
: > "$TMP/empty.jsonl"
expect_error "tables --out under /proc" "^error: --out /proc/x: .*(No such file or directory|Permission denied)$" \
  "$BIN" tables --results "$TMP/empty.jsonl" --out /proc/x
expect_error "tables --out /proc" "^error: --out /proc: .*(No such file or directory|Permission denied)$" \
  "$BIN" tables --results "$TMP/empty.jsonl" --out /proc
expect_error "tables table5 --out under /proc" "^error: --out /proc/x: .*(No such file or directory|Permission denied)$" \
  "$BIN" tables table5 --results "$TMP/empty.jsonl" --lens 128 --out /proc/x
# The same for inspect's outputs, found once the model is loaded (it was a raw "filesystem
# error: cannot create directories" naming no option).
expect_error "inspect --position-weights under /proc" \
  "^error: --position-weights /proc/x/pw.json: cannot create the folder /proc/x: (No such file or directory|Permission denied)$" \
  "$BIN" inspect "$TMP/run" --position-weights /proc/x/pw.json
expect_error "inspect --mlm-loss in /proc" "^error: --mlm-loss /proc/mlm.json: cannot write /proc/mlm.json: .*$" \
  "$BIN" inspect "$TMP/run" --mlm-loss /proc/mlm.json --eval-file "$ROOT/README.md" --lengths 16
# A disk with no inode left refuses the first new file (ENOSPC on open, not on a write): the
# machine's error, exit 1, naming the file (it was called an --out error, exit 2), and nothing
# written. A 3-inode tmpfs, where mounting works.
mkdir -p "$TMP/full"
if mount -t tmpfs -o size=1m,nr_inodes=3 none "$TMP/full" 2>/dev/null; then
  mkdir "$TMP/full/t" && : > "$TMP/full/filler"  # the root, t and filler: no inode left
  "$BIN" tables --results "$TMP/empty.jsonl" --out "$TMP/full/t" >"$TMP/out" 2>"$TMP/err"
  code=$?
  if [ "$code" -eq 1 ] && [ "$(grep -c '' "$TMP/err")" -eq 1 ] && [ -z "$(ls -A "$TMP/full/t")" ] &&
    grep -qx "error: no space left on device: $TMP/full/t/tables.md" "$TMP/err"; then
    echo "ok   tables with no inode left: $(cat "$TMP/err")"
  else
    echo "FAIL tables with no inode left: exit $code:"; cat "$TMP/err"; ls -A "$TMP/full/t"; fail=1
  fi
  umount "$TMP/full"
else
  echo "skip tables with no inode left: cannot mount a tmpfs here"
fi
[ ! -e "$TMP/tf" ] && [ ! -e "$TMP/att.json" ] || { echo "FAIL outputs written after a FIFO input"; fail=1; }
exit $fail
