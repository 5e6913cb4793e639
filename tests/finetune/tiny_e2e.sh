#!/usr/bin/env bash
# Tiny end-to-end CPU run: pretrain tiny_m4 for a few steps on data/sample, fine-tune on the
# SQuAD sample, check predictions.json with the independent Python scorer, render tables.
# Usage: tiny_e2e.sh RPE_TRAIN PYTHON   (run from the repository root; ~1-2 minutes on 2 cores)
set -euo pipefail
RPE=$1
PY=$2
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

"$RPE" pretrain --config configs/pretrain/tiny_m4.yaml --run-dir "$OUT/pre" \
  --set train.max_steps=10 --set train.warmup_steps=2 --set train.eval_every=0 --set train.batch_size=16 --set data.max_seq_len=64
"$RPE" finetune squad --config configs/finetune/tiny_squad.yaml --init "$OUT/pre" --run-dir "$OUT/ft" \
  --seeds 1,2 --set finetune.max_train_examples=96 --set finetune.max_eval_examples=120 --set finetune.epochs=1 \
  --set finetune.results_file="$OUT/results.jsonl"
for s in 1 2; do
  test -s "$OUT/ft/seed$s/predictions.json"
  "$PY" - data/sample/squad/dev-v1.1.json "$OUT/sub.json" 120 <<'PYEOF'
import json, sys  # the first N questions, as finetune.max_eval_examples evaluates
d, n = json.load(open(sys.argv[1])), int(sys.argv[3])
for a in d["data"]:
    for p in a["paragraphs"]:
        keep = []
        for qa in p["qas"]:
            if n > 0: keep.append(qa); n -= 1
        p["qas"] = keep
json.dump(d, open(sys.argv[2], "w"))
PYEOF
  "$PY" "$HERE/../eval/squad_reference.py" "$OUT/sub.json" "$OUT/ft/seed$s/predictions.json" > "$OUT/ref.json"
  "$PY" - "$OUT/ref.json" "$OUT/ft/seed$s/results.json" <<'PYEOF'
import json, sys
ref, ours = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert round(ref["exact_match"], 2) == round(ours["exact"], 2), (ref, ours)
assert round(ref["f1"], 2) == round(ours["f1"], 2), (ref, ours)
print(f"seed results agree with the reference scorer: EM {ours['exact']:.2f} F1 {ours['f1']:.2f}")
PYEOF
done
test "$(wc -l < "$OUT/results.jsonl")" -eq 4  # 2 seeds x (exact, f1)
# GLUE: MNLI's two dev sets (matched/mismatched) and STS-B's regression head, briefly.
for task in mnli stsb; do
  "$RPE" finetune glue --task $task --config configs/finetune/tiny_glue.yaml --init "$OUT/pre" --run-dir "$OUT/glue_$task" \
    --seeds 1 --set finetune.max_train_examples=48 --set finetune.epochs=1 --set finetune.results_file="$OUT/results.jsonl"
  test -s "$OUT/glue_$task/seed1/results.json"
done
test "$(wc -l < "$OUT/results.jsonl")" -eq 8  # + mnli m/mm accuracy + stsb pearson/spearman
# Fine-tuning with its layers recomputed in backward (train.activation_checkpointing) trains as
# without: STS-B's correlations of the run above, to rounding of the last bits of the gradients.
"$RPE" finetune glue --task stsb --config configs/finetune/tiny_glue.yaml --init "$OUT/pre" --run-dir "$OUT/glue_stsb_rc" \
  --seeds 1 --set finetune.max_train_examples=48 --set finetune.epochs=1 --set train.activation_checkpointing=layers \
  --set finetune.results_file="$OUT/results_rc.jsonl" > "$OUT/glue_stsb_rc.log" 2>&1 || { cat "$OUT/glue_stsb_rc.log"; exit 1; }
grep -q "activation checkpointing: each encoder layer recomputed" "$OUT/glue_stsb_rc.log"
"$PY" - "$OUT/glue_stsb/seed1/results.json" "$OUT/glue_stsb_rc/seed1/results.json" <<'PYEOF'
import json, sys
plain, rc = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
for k in ("pearson", "spearman"):
    assert abs(plain["dev"][k] - rc["dev"][k]) < 1e-3, (k, plain["dev"], rc["dev"])
print(f"recomputed fine-tuning scores as plain: pearson {rc['dev']['pearson']:.4f}")
PYEOF
"$RPE" tables --results "$OUT/results.jsonl" --out "$OUT/tables"
grep -q "n=2" "$OUT/tables/tables.md"
grep -q "Table 4" "$OUT/tables/tables.md"
grep -q "84.45" "$OUT/tables/tables.md"  # the paper's MNLI-m for method 4 beside ours
# Bad input: an answer offset that does not match -> exit 2, one line, no run folder written.
sed 's/"answer_start": 23/"answer_start": 24/' data/sample/squad/dev-v1.1.json > "$OUT/bad.json"
set +e
msg=$("$RPE" finetune squad --config configs/finetune/tiny_squad.yaml --init "$OUT/pre" --run-dir "$OUT/ft_bad" \
  --set finetune.dev_file="$OUT/bad.json" 2>&1 >/dev/null)
code=$?
set -e
echo "bad input -> exit $code: $msg"
test $code -eq 2
echo "$msg" | grep -q "bad.json: data\[0\].paragraphs\[0\].qas\[0\] (id squad-dev-000000).answers\[0\]: answer_start 24 does not match"
test ! -e "$OUT/ft_bad"
echo "tiny e2e: OK"
