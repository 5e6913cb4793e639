#!/usr/bin/env bash
# End to end: scripts/reproduce/table2.sh at tiny scale for absolute and m4 (two seeds, a few
# pretraining steps, a small SQuAD sample) must render Table 2 with both methods, n = 2 seeds
# and the paper's numbers, and the cost table; a second call must skip every finished run; a
# pretraining run without summary.json, a fine-tuning run without results.json and one whose
# results.jsonl lost a line must be continued with --resume, and other settings
# over the same runs, or input files changed in place, must be refused (their stamps). Then `rpe-train
# inspect` output is checked against the checkpoint (check_inspect.py) and Figures 4/5 render.
# Dry runs first: Figure 4's before its pretraining run exists, and paper scale's SQuAD length.
# usage: test_table2_tiny.sh RPE_TRAIN PYTHON
set -euo pipefail
BIN="$(realpath "$1")"
PY="$2"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="$(mktemp -d)"
SQ="$(mktemp -d)"  # a copy of the sample SQuAD, changed at the end (outside --out: not moved with it)
trap 'rm -rf "$OUT" "$SQ"' EXIT
cp "$ROOT"/data/sample/squad/*-v1.1.json "$SQ/"
fail() { echo "FAIL: $*" >&2; exit 1; }

small=(--methods absolute,m4 --seeds 1,2 --out "$OUT" --rpe-train "$BIN" --python "$PY" --squad-dir "$SQ"
  --pretrain-set train.max_steps=12 --pretrain-set train.batch_size=8 --pretrain-set train.warmup_steps=2
  --pretrain-set train.log_every=4 --pretrain-set train.eval_every=0 --pretrain-set train.save_every=6
  --finetune-set finetune.max_train_examples=32 --finetune-set finetune.max_eval_examples=48
  --finetune-set finetune.epochs=1)
# A dry run before any pretraining exists prints the commands (the layers from the config the
# run would train with: tiny has 2), and runs nothing.
bash "$ROOT/scripts/reproduce/figure4.sh" --scale tiny --dry-run --out "$OUT/dry" --rpe-train "$BIN" --methods m4 \
  >"$OUT/dry.log" 2>&1 || { cat "$OUT/dry.log"; fail "figure4.sh --dry-run without a pretraining run"; }
for want in "pretrain --config configs/pretrain/tiny_m4.yaml" "--layer 0 --head 0" "--layer 1 --head 0"; do
  grep -qF -- "$want" "$OUT/dry.log" || { cat "$OUT/dry.log"; fail "figure4.sh --dry-run printed no '$want'"; }
done
[[ ! -e "$OUT/dry/pretrain" ]] || fail "figure4.sh --dry-run made a run folder"
# At paper scale SQuAD is fine-tuned at the pretraining length, 512, as the paper's Tables 2 and 4.
bash "$ROOT/scripts/reproduce/table2.sh" --scale paper --dry-run --out "$OUT/dry" --rpe-train "$BIN" --methods m4 \
  --seeds 1 --squad-dir "$ROOT/data/sample/squad" --corpus "$ROOT/data/sample/corpus.txt" >"$OUT/dry.log" 2>&1 ||
  { cat "$OUT/dry.log"; fail "table2.sh --scale paper --dry-run"; }
grep -q -- "finetune squad .*--set finetune.max_seq_len=512 " "$OUT/dry.log" ||
  { cat "$OUT/dry.log"; fail "paper scale: SQuAD not fine-tuned at 512"; }

bash "$ROOT/scripts/reproduce/table2.sh" --scale tiny "${small[@]}" >"$OUT/first.log" 2>&1 ||
  { tail -30 "$OUT/first.log"; fail "table2.sh exited $?"; }

md="$OUT/tables/table2/tables.md"
csv="$OUT/tables/table2/tables.csv"
[[ -s "$md" && -s "$csv" ]] || fail "tables.md / tables.csv missing"
grep -q '^## Table 2' "$md" || fail "no Table 2 section in tables.md"
! grep -q '^## Table [34]' "$md" || fail "tables.md of Table 2 has other tables' sections"
# table,method,k,pretrain_max_len,finetune_max_len,pretrain_run,column,mean,std,n,paper,dev_examples
for row in "absolute,EM,81.58" "absolute,F1,88.59" "m4,EM,83.63" "m4,F1,90.53"; do
  IFS=, read -r method column paper <<<"$row"
  n=$(awk -F, -v m="$method" -v c="$column" -v p="$paper" \
      '$1 == "Table 2" && $2 == m && $7 == c && $10 == 2 && $11 == p' "$csv" | wc -l)
  [[ "$n" == 1 ]] || { cat "$csv"; fail "expected one Table 2 row $method/$column with n=2 and paper $paper"; }
done
rows=$(awk -F, '$1 == "Table 2" && $2 !~ /Devlin/' "$csv" | wc -l)
[[ "$rows" == 4 ]] || fail "Table 2 has $rows CSV rows of ours, expected 4 (2 methods x EM/F1)"
grep -q '^| BERT (Devlin et al., published) | .* 80.80 | .* 88.50 |$' "$md" || fail "Table 2 lacks the paper's BERT row"
cost="$OUT/tables/table2/cost.csv"
[[ $(tail -n +2 "$cost" | cut -d, -f1 | sort | tr '\n' ' ') == "absolute m4 " ]] || { cat "$cost"; fail "cost table rows"; }
for m in absolute m4; do [[ -s "$OUT/pretrain/$m/config.yaml" ]] || fail "pretrain/$m keeps no config.yaml"; done
[[ -s "$OUT/finetune/table2/m4_s2/config.yaml" ]] || fail "fine-tuning run keeps no config.yaml"

# Restart: everything finished is skipped; a pretraining run without summary.json is resumed,
# and so is a fine-tuning run without its seed's results.json (as a kill in its training leaves it;
# its result lines go too, and come back from the resumed run, once).
rm "$OUT/pretrain/m4/summary.json" "$OUT/finetune/table2/absolute_s2/seed2/results.json"
: >"$OUT/finetune/table2/absolute_s2/results.jsonl"
# A finished run whose last result line a kill kept out (after its results.json) gets it back.
m4_lines="$OUT/finetune/table2/m4_s1/results.jsonl"
head -n 1 "$m4_lines" >"$OUT/m4_s1.lines" && cp "$OUT/m4_s1.lines" "$m4_lines"
bash "$ROOT/scripts/reproduce/table2.sh" --scale tiny "${small[@]}" >"$OUT/second.log" 2>&1 ||
  { tail -30 "$OUT/second.log"; fail "second table2.sh exited $?"; }
[[ $(grep -c 'done, skipped' "$OUT/second.log") == 3 ]] || { cat "$OUT/second.log"; fail "expected 3 skipped runs"; }
grep -q 'pretrain m4: resuming' "$OUT/second.log" || fail "m4 pretraining was not resumed"
grep -q -- 'pretrain --config configs/pretrain/tiny_m4.yaml .*--resume' "$OUT/second.log" || fail "no --resume"
[[ -s "$OUT/pretrain/m4/summary.json" ]] || fail "resumed run wrote no summary.json"
grep -q 'finetune table2/absolute_s2: resuming' "$OUT/second.log" || { cat "$OUT/second.log"; fail "absolute_s2 was not resumed"; }
grep -q 'finetune table2/m4_s1: finished, but 1 of its 2 result lines' "$OUT/second.log" ||
  { cat "$OUT/second.log"; fail "m4_s1's missing result line was not noticed"; }
[[ $(grep -c 'finetune squad' "$OUT/second.log") == 2 ]] &&
  grep -q -- 'finetune squad .*--run-dir [^ ]*/finetune/table2/absolute_s2 .*--resume' "$OUT/second.log" &&
  grep -q -- 'finetune squad .*--run-dir [^ ]*/finetune/table2/m4_s1 .*--resume' "$OUT/second.log" ||
  { cat "$OUT/second.log"; fail "expected two fine-tuning commands, absolute_s2's and m4_s1's, with --resume"; }
[[ -s "$OUT/finetune/table2/absolute_s2/seed2/results.json" ]] || fail "the resumed fine-tuning wrote no results.json"
for run in absolute_s2 m4_s1; do
  [[ $(grep -c '"metric":' "$OUT/finetune/table2/$run/results.jsonl") == 2 ]] ||
    { cat "$OUT/finetune/table2/$run/results.jsonl"; fail "$run: expected its 2 result lines (EM, F1) once"; }
done
# Runs are reused only for the settings they were made with (their stamps): another lr or another
# number of epochs stops the script (exit 2) naming the key, before any work.
grep -qx 'model.attention.method: m4' "$OUT/pretrain/m4.stamp" || fail "pretrain/m4.stamp lacks the method"
grep -qx "init: <out>/pretrain/m4" "$OUT/finetune/table2/m4_s1.stamp" || fail "finetune stamp lacks the init"
# ... and the files they read, by content: the corpus, the start checkpoint, SQuAD's files.
grep -qE '^input: <repo>/data/sample/corpus.txt [0-9]+ [0-9a-f]{16}$' "$OUT/pretrain/m4.stamp" || fail "pretrain stamp lacks the corpus"
for f in '<out>/pretrain/m4/checkpoints/step_[0-9]+.pt' "$SQ/train-v1.1.json" "$SQ/dev-v1.1.json"; do
  grep -qE "^input: $f [0-9]+ [0-9a-f]{16}\$" "$OUT/finetune/table2/m4_s1.stamp" || { cat "$OUT/finetune/table2/m4_s1.stamp"; fail "finetune stamp lacks input $f"; }
done
# Stamps name --out and the checkout as <out>/<repo>: a moved --out is reused as it is.
cp -a "$OUT" "$OUT.moved"
bash "$ROOT/scripts/reproduce/table2.sh" --scale tiny "${small[@]}" --out "$OUT.moved" >"$OUT/moved.log" 2>&1 ||
  { rm -rf "$OUT.moved"; cat "$OUT/moved.log"; fail "a moved --out was not reused"; }
rm -rf "$OUT.moved"
[[ $(grep -c 'done, skipped' "$OUT/moved.log") == 6 ]] || { cat "$OUT/moved.log"; fail "a moved --out: expected 6 skipped runs"; }
for change in "--pretrain-set train.lr=0.0007:pretrain absolute: .* was made with other settings [(]train.lr: " \
              "--finetune-set finetune.epochs=2:finetune table2/absolute_s1: .*[(]finetune.epochs: 1 there, finetune.epochs: 2 now[)]"; do
  opt="${change%%:*}"; want="${change#*:}"
  set +e
  bash "$ROOT/scripts/reproduce/table2.sh" --scale tiny "${small[@]}" ${opt} >"$OUT/third.log" 2>&1
  rc=$?
  set -e
  [[ $rc == 2 ]] && grep -q "^error: $want" "$OUT/third.log" || { cat "$OUT/third.log"; fail "$opt: expected exit 2 and /$want/"; }
  if grep -q -- '--config configs' "$OUT/third.log"; then cat "$OUT/third.log"; fail "$opt: a run was started"; fi
done
# So does an input file changed in place: SQuAD's dev file, one byte longer (the same JSON).
size=$(stat -c %s "$SQ/dev-v1.1.json")
echo >>"$SQ/dev-v1.1.json"
set +e
bash "$ROOT/scripts/reproduce/table2.sh" --scale tiny "${small[@]}" >"$OUT/edited.log" 2>&1
rc=$?
set -e
want="finetune table2/absolute_s1: .*[(]input: $SQ/dev-v1.1.json $size [0-9a-f]+ there, input: $SQ/dev-v1.1.json $((size + 1)) [0-9a-f]+ now[)]"
[[ $rc == 2 ]] && grep -qE "^error: $want" "$OUT/edited.log" || { cat "$OUT/edited.log"; fail "an edited SQuAD file: expected exit 2 and /$want/"; }
truncate -s "$size" "$SQ/dev-v1.1.json"
# The longest input a model takes: a learned absolute table's rows, or none.
[[ "$("$BIN" inspect "$OUT/pretrain/absolute" --max-length)" == 128 ]] || fail "inspect --max-length: absolute is not 128"
[[ "$("$BIN" inspect "$OUT/pretrain/m4" --max-length)" == none ]] || fail "inspect --max-length: m4 is not none"

# inspect against the checkpoint, then the figures.
ck="$OUT/pretrain/m4/checkpoints/$(cat "$OUT/pretrain/m4/checkpoints/latest")"
"$BIN" inspect "$OUT/pretrain/m4" --position-weights "$OUT/w.json" --layer 1 --head 1 >/dev/null
"$BIN" inspect "$ck" --position-weights "$OUT/w.npy" --layer 1 --head 1 \
  --attention "$OUT/a.json" --text "The quick brown fox jumps over the lazy dog near the river bank." >/dev/null
"$PY" "$ROOT/tests/reproduce/check_inspect.py" "$ck" "$OUT/w.json" "$OUT/w.npy" "$OUT/a.json"
set +e
"$BIN" inspect "$OUT/pretrain/absolute" --position-weights "$OUT/x.json" >"$OUT/err.log" 2>&1
rc=$?
set -e
[[ $rc == 2 ]] && grep -q 'no learned per-distance table' "$OUT/err.log" || { cat "$OUT/err.log"; fail "absolute: expected exit 2"; }
bash "$ROOT/scripts/reproduce/figure4.sh" --scale tiny "${small[@]}" --methods m4 >"$OUT/fig4.log" 2>&1 ||
  { tail -20 "$OUT/fig4.log"; fail "figure4.sh"; }
bash "$ROOT/scripts/reproduce/figure5.sh" --scale tiny "${small[@]}" >"$OUT/fig5.log" 2>&1 ||
  { tail -20 "$OUT/fig5.log"; fail "figure5.sh"; }
for f in figure4 figure5; do
  [[ "$(head -c 8 "$OUT/figures/$f.png" | od -An -tx1 | tr -d ' \n')" == 89504e470d0a1a0a ]] || fail "$f.png is not a PNG"
done
echo "reproduce table2 tiny: OK"
