#!/usr/bin/env bash
# End to end: the Table 3, 4, 5 and extrapolation scripts at tiny scale with a handful of steps
# (one seed, small samples), checking that each renders its rows: Table 3's GLUE columns with
# the paper's numbers, Table 4's k sweep and its fine-tuning lengths beyond the pretraining
# length, Table 5's drop-in rows at 128..176, and the extrapolation sweep (absolute refused
# beyond its table, relative methods measured there) with its PNG.
# Table 4's unclipped k = n - 1 is Table 2's pretrain/m4, reused, in the paper's k = 512 row.
# Table 4 runs through a stand-in --launcher, which must start its pretrain/finetune commands only.
# usage: test_tables345_tiny.sh RPE_TRAIN PYTHON
set -euo pipefail
BIN="$(realpath "$1")"
PY="$2"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
small=(--seeds 1 --out "$OUT" --rpe-train "$BIN" --python "$PY"
  --pretrain-set train.max_steps=8 --pretrain-set train.batch_size=8 --pretrain-set train.warmup_steps=2
  --pretrain-set train.log_every=4 --pretrain-set train.eval_every=0 --pretrain-set train.save_every=8
  --finetune-set finetune.max_train_examples=16 --finetune-set finetune.max_eval_examples=24
  --finetune-set finetune.epochs=1)
run() {  # run SCRIPT ARGS...: the script at tiny scale, its log shown on failure
  local name="$1"; shift
  bash "$ROOT/scripts/reproduce/$name.sh" --scale tiny "$@" "${small[@]}" >"$OUT/$name.log" 2>&1 ||
    { tail -30 "$OUT/$name.log"; fail "$name.sh exited non-zero"; }
}
rows() { awk -F, "$1" "$2" | wc -l; }  # rows AWK_CONDITION FILE

run table3 --methods absolute,m4
csv="$OUT/tables/table3/tables.csv"
for col in MNLI-m MNLI-mm "QQP F1" SST-2 "MRPC F1"; do
  for m in absolute m4; do
    [[ $(rows "\$1 == \"Table 3\" && \$2 == \"$m\" && \$7 == \"$col\" && \$11 != \"\"" "$csv") == 1 ]] ||
      { cat "$csv"; fail "Table 3: no $m / $col row with the paper's number"; }
  done
done
grep -q '^Table 3,m4,.*,MNLI-m,.*,84.45,[^,]*$' "$csv" || fail "Table 3: m4 MNLI-m without the paper's 84.45"
[[ -s "$OUT/tables/table3/cost.csv" ]] || fail "Table 3: no cost table"
# A GLUE run's stamp names the task's files by content (from finetune.glue_dir, or data_dir when set).
glue_stamp=$(grep -l '^task: glue:mrpc$' "$OUT"/finetune/table3/*.stamp | head -1)
for f in train dev; do
  grep -qE "^input: <repo>/data/sample/glue/MRPC/$f.tsv [0-9]+ [0-9a-f]{16}\$" "$glue_stamp" ||
    { cat "$glue_stamp"; fail "GLUE stamp lacks MRPC's $f.tsv"; }
done
[[ "$("$BIN" dump-config --inputs --config "$ROOT/configs/finetune/tiny_glue.yaml" --init "$OUT/pretrain/m4" \
        --set finetune.task=mnli --set finetune.data_dir=/elsewhere 2>&1)" == *"/elsewhere: no such GLUE task folder"* ]] ||
  fail "dump-config --inputs: a missing data_dir is not named"
"$BIN" dump-config --inputs --config "$ROOT/configs/finetune/tiny_glue.yaml" --init "$OUT/pretrain/m4" \
  --set finetune.task=mnli --set "finetune.data_dir=$ROOT/data/sample/glue/MNLI" >"$OUT/inputs.txt"
grep -qx "$ROOT/data/sample/glue/MNLI/dev_mismatched.tsv" "$OUT/inputs.txt" && grep -q '/pretrain/m4/checkpoints/step_[0-9]*.pt$' "$OUT/inputs.txt" ||
  { cat "$OUT/inputs.txt"; fail "dump-config --inputs: MNLI's second dev file or the start checkpoint is not named"; }

# Table 4 through a launcher (--launcher): a stand-in that records what it starts and runs it.
printf '#!/bin/sh\necho "$*" >>%s\nexec "$@"\n' "$OUT/launched.txt" >"$OUT/launch" && chmod +x "$OUT/launch"
run table4 --launcher "$OUT/launch"
csv="$OUT/tables/table4/table4_scaled.csv"
for k in 2 4 8 16 32 64 127; do
  [[ $(rows "\$1 == \"m4_k$k\" && \$2 == $k && \$4 == 128" "$csv") == 1 ]] || { cat "$csv"; fail "Table 4: no k=$k row"; }
done
# k = n - 1 = 127 is Table 2's m4 (max_relative 0 means n - 1): the run Table 3 made above is
# reused, not pretrained again as m4_k127, and still fills the unclipped row, the paper's k = 512.
[[ ! -e "$OUT/pretrain/m4_k127" ]] || fail "Table 4 pretrained m4_k127, the same model as pretrain/m4"
grep -q "pretrain m4: done, skipped" "$OUT/table4.log" || { cat "$OUT/table4.log"; fail "Table 4 did not reuse pretrain/m4"; }
grep -qx "init: <out>/pretrain/m4" "$OUT/finetune/table4/m4_k127_s1.stamp" || fail "Table 4's k=127 row does not start from pretrain/m4"
grep -q "^m4_k127,127,128,128,.*,83.63,90.53\$" "$csv" || { cat "$csv"; fail "Table 4: m4_k127 is not the paper's k = 512 row"; }
[[ $(grep -c "^Table 4,m4,127,128,128,m4," "$OUT/tables/table4/tables.csv") == 2 ]] ||
  { cat "$OUT/tables/table4/tables.csv"; fail "Table 4: no k=127 EM/F1 rows from pretrain/m4"; }
# Only the training went through the launcher: each pretraining and fine-tuning it made, no other command.
[[ $(grep -c . "$OUT/launched.txt") == $(grep -cE "\] $OUT/launch " "$OUT/table4.log") ]] &&
  [[ $(grep -cvE "/rpe-train (pretrain|finetune squad) " "$OUT/launched.txt") == 0 ]] &&
  grep -q "rpe-train pretrain .*pretrain/m4_k2 " "$OUT/launched.txt" && grep -q "rpe-train finetune squad " "$OUT/launched.txt" ||
  { cat "$OUT/launched.txt"; fail "Table 4: --launcher started other commands than pretrain/finetune, or not those"; }
for len in 144 160 176; do  # fine-tuned beyond the pretraining length 128
  [[ $(rows "\$1 == \"m4_k64_ft$len\" && \$3 == 128 && \$4 == $len" "$csv") == 1 ]] || { cat "$csv"; fail "Table 4: no length $len row"; }
done

run table5
csv="$OUT/tables/table5/table5.csv"
[[ $(rows '$1 == "absolute_ft128" && $2 == "absolute"' "$csv") == 1 ]] || { cat "$csv"; fail "Table 5: no absolute row"; }
# The swapped models know what they were pretrained as: their rows say so and carry the paper's
# numbers (the lengths 128-176 are the paper's 512-704 scaled).
swapped="m4 (swapped into absolute pretraining)"
for len in 128 144 160 176; do
  [[ $(rows "\$1 == \"drop_in_m4_noabs_ft$len\" && \$2 == \"$swapped\" && \$4 == $len && \$8 != \"—\"" "$csv") == 1 ]] ||
    { cat "$csv"; fail "Table 5: no drop-in row at $len with the paper's numbers"; }
done
[[ $(rows "\$1 == \"drop_in_m4_abs_ft128\" && \$2 == \"$swapped\" && \$4 == 128" "$csv") == 1 ]] ||
  { cat "$csv"; fail "Table 5: no row for the model that keeps the absolute table"; }
grep -q 'add_absolute: false' "$OUT/pretrain/drop_in_m4_noabs/config.yaml" || fail "Table 5: the length rows must drop the absolute table"
grep -q 'pretrained_method: absolute' "$OUT/pretrain/drop_in_m4_noabs/config.yaml" || fail "Table 5: the swap does not record its weights' method"
grep '"drop_in_m4_noabs_ft144_s1/seed1"' "$OUT/tables/table5/results.jsonl" | grep -q '"pretrain_method":"absolute"' ||
  fail "Table 5: the drop-in result lines do not record pretrain_method absolute"
# The swapped models are stamped with the base checkpoint by content: a redone base run at the
# same path stops the script (exit 2) instead of reusing a swap of the old one.
base_ck="$OUT/pretrain/absolute/checkpoints/$(cat "$OUT/pretrain/absolute/checkpoints/latest")"
grep -qE "^input: <out>/pretrain/absolute/checkpoints/step_[0-9]+.pt [0-9]+ [0-9a-f]{16}\$" "$OUT/pretrain/drop_in_m4.stamp" ||
  { cat "$OUT/pretrain/drop_in_m4.stamp"; fail "Table 5: the swap's stamp lacks the base checkpoint"; }
size=$(stat -c %s "$base_ck")
printf x >>"$base_ck"
set +e
bash "$ROOT/scripts/reproduce/table5.sh" --scale tiny "${small[@]}" >"$OUT/table5_edited.log" 2>&1
rc=$?
set -e
truncate -s "$size" "$base_ck"
[[ $rc == 2 ]] && grep -qE "^error: swap drop_in_m4: .* was made with other settings [(]input: <out>/pretrain/absolute/checkpoints/step_[0-9]+.pt $size " "$OUT/table5_edited.log" ||
  { cat "$OUT/table5_edited.log"; fail "Table 5: a changed base checkpoint: expected exit 2 naming it"; }
run table5
grep -q "swap drop_in_m4: done, skipped" "$OUT/table5.log" || { cat "$OUT/table5.log"; fail "Table 5: the swap was not reused"; }
# Only the length differs between the drop-in rows: every one starts from the same model.
for len in 128 144 160 176; do
  grep -q "\[init\] .*/drop_in_m4_noabs/" "$OUT/finetune/table5/drop_in_m4_noabs_ft${len}_s1/finetune.log" ||
    fail "Table 5: drop_in_m4_noabs_ft$len does not start from drop_in_m4_noabs"
done

run extrapolation --methods absolute,m4
csv="$OUT/tables/extrapolation/extrapolation.csv"
[[ $(rows '$1 == "absolute" && $2 == "MLM loss" && $4 == 256 && $5 ~ /^n\/a/' "$csv") == 1 ]] ||
  { cat "$csv"; fail "extrapolation: absolute at 256 should be n/a"; }
[[ $(rows '$1 == "m4" && $2 == "MLM loss" && $4 == 256 && $5 ~ /^[0-9]/' "$csv") == 1 ]] ||
  { cat "$csv"; fail "extrapolation: no m4 MLM loss at 256"; }
[[ $(rows '$1 == "m4" && $2 == "SQuAD F1" && $4 == 192' "$csv") == 1 ]] || { cat "$csv"; fail "extrapolation: no m4 SQuAD at 192"; }
[[ $(rows '$1 == "absolute" && $2 == "SQuAD F1" && $4 > 128' "$csv") == 0 ]] || { cat "$csv"; fail "extrapolation: absolute beyond 128"; }
[[ "$(head -c 8 "$OUT/tables/extrapolation/extrapolation.png" | od -An -tx1 | tr -d ' \n')" == 89504e470d0a1a0a ]] ||
  fail "extrapolation.png is not a PNG"
# A rerun measures nothing again; another evaluation text is measured anew, not read from before.
run extrapolation --methods absolute,m4
! grep -q -- "--mlm-loss" "$OUT/extrapolation.log" || fail "extrapolation: a rerun measured the MLM losses again"
head -c 20000 "$ROOT/data/sample/corpus.txt" >"$OUT/eval.txt"
RPE_EVAL_FILE="$OUT/eval.txt" run extrapolation --methods absolute,m4
grep -q '"eval_file": *"[^"]*/eval.txt"' "$OUT/tables/extrapolation/mlm_m4.json" ||
  fail "extrapolation: mlm_m4.json was not measured on the new evaluation text"
echo "reproduce tables 3/4/5 + extrapolation tiny: OK"
