#!/usr/bin/env bash
# The card's commands as a user types them, then the kept model in use, at tiny scale on CPU:
#   rpe-train pretrain --config tiny_method4.yaml        (a preset reached by name)
#   rpe-train finetune squad                             (newest finished run, default config)
#   rpe-train predict squad --model .../seed1/model ...  (same EM/F1 as the fine-tuning run)
#   rpe-train finetune glue --task rte; predict glue on dev (same accuracy) and on a test file;
#   the same with early stopping (its dev curve and training rows)
# The working folder mimics a checkout (configs/ and data/ linked in); small squad_v1.yaml,
# glue.yaml and tiny_method4.yaml in it come first on the config search path, so the commands
# run exactly as written but briefly. Also: what a user sees with no run or no data (exit 2).
# Usage: saved_model_e2e.sh RPE_TRAIN SOURCE_DIR   (~2 minutes on 2 cores)
set -euo pipefail
RPE=$1
SRC=$(cd "$2" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
ln -s "$SRC/configs" configs
mkdir -p data
ln -s "$SRC/data/sample" data/sample
fail() { echo "FAIL: $*" >&2; exit 1; }
expect_exit2() {  # expect_exit2 PATTERN CMD...: exit code 2 and one stderr line matching PATTERN
  local pattern=$1; shift
  set +e
  local err
  err=$("$@" 2>&1 >/dev/null)
  local code=$?
  set -e
  [ $code -eq 2 ] || fail "$* exited $code, not 2: $err"
  [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] || fail "$*: more than one stderr line: $err"
  printf '%s\n' "$err" | grep -Eq "$pattern" || fail "$*: '$err' does not match /$pattern/"
  echo "ok (exit 2): $err"
}

# Nothing pretrained yet: one line naming the command that provides it.
expect_exit2 "no finished pretraining run under runs/.*rpe-train pretrain --config" "$RPE" finetune squad

cat > tiny_method4.yaml <<'EOF'
extends: [configs/pretrain/tiny.yaml, configs/attention/m4.yaml]
model: {attention: {method: m4}}
run: {name: tiny_m4}
train: {max_steps: 12, warmup_steps: 2, eval_every: 0, batch_size: 16}
data: {max_seq_len: 64}
EOF
"$RPE" pretrain --config tiny_method4.yaml > pretrain.log
test -s runs/tiny_m4/summary.json || fail "pretraining wrote no summary.json"

# A finished run but no SQuAD files where download_data.sh puts them.
expect_exit2 "data/full/squad/train-v1.1.json: file not found .*scripts/download_data.sh squad" "$RPE" finetune squad

mkdir -p data/full
ln -s "$SRC/data/sample/squad" data/full/squad
cat > squad_v1.yaml <<'EOF'
extends: configs/finetune/tiny_squad.yaml
finetune: {train_file: data/full/squad/train-v1.1.json, dev_file: data/full/squad/dev-v1.1.json,
           max_train_examples: 96, max_eval_examples: 0, epochs: 2, select: best, results_file: runs/results.jsonl}
run: {root: runs, name: squad_v1}
EOF
"$RPE" finetune squad > finetune.log
grep -q -- "--init runs/tiny_m4 (the newest finished pretraining run" finetune.log || fail "the chosen run was not printed"
[[ $(grep -c "\[init\] " finetune.log) == 1 ]] || fail "the init line is not printed once: $(grep "\[init\] " finetune.log)"
SEED_DIR=$(echo runs/squad_v1/seed*)  # train.seed of the preset
MODEL=$SEED_DIR/model
for f in model.pt config.yaml tokenizer.model task.json; do test -s "$MODEL/$f" || fail "$MODEL/$f missing"; done
# The dev curve: each epoch's end and the final evaluation (the last row, at the last step); with
# select: best the kept model is the curve's best point, and results.json scores that model.
python3 - "$SEED_DIR/metrics.jsonl" "$SEED_DIR/results.json" <<'PYEOF' || fail "dev curve vs results.json"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
results = json.load(open(sys.argv[2]))
valid = [r for r in rows if r.get("split") == "valid"]
assert len(valid) == 2 and rows[-1] is valid[-1] and valid[-1]["step"] == results["steps"], valid
best = max(valid, key=lambda r: r["f1"])
assert abs(best["f1"] - results["f1"]) < 1e-9 and abs(best["exact"] - results["exact"]) < 1e-9, (best, results)
assert results["model_step"] == best["step"], (valid, results["model_step"])  # the first best: ties keep the earlier
print(f"dev curve: {[(r['step'], round(r['f1'], 2)) for r in valid]}, kept step {results['model_step']}")
PYEOF

mkdir pred
"$RPE" predict squad --model "$MODEL" --input data/full/squad/dev-v1.1.json --out pred/predictions.json > predict.log
for f in predictions.json nbest_predictions.json; do test -s "pred/$f" || fail "predict wrote no $f"; done
python3 - "$SEED_DIR/results.json" predict.log pred "$SEED_DIR" <<'PYEOF'
import json, sys
results = json.load(open(sys.argv[1]))
printed = dict(line.split()[1:3] for line in open(sys.argv[2]) if line.startswith("squad_v1 "))
for k in ("exact", "f1"):
    assert abs(float(printed[k]) - results[k]) < 1e-9, (k, printed[k], results[k])
ours, kept = json.load(open(sys.argv[3] + "/predictions.json")), json.load(open(sys.argv[4] + "/predictions.json"))
assert ours == kept, "predict's answers differ from the fine-tuning run's"
nbest = json.load(open(sys.argv[3] + "/nbest_predictions.json"))
for qid, answer in ours.items():
    probs = [e["probability"] for e in nbest[qid]]
    assert nbest[qid][0]["text"] == answer and abs(sum(probs) - 1) < 1e-6 and probs == sorted(probs, reverse=True), qid
print(f"predict squad = fine-tuning: EM {results['exact']:.2f} F1 {results['f1']:.2f} (model of step {results['model_step']})")
PYEOF
# A partly labelled file is scored on its labelled questions only: the dev file plus copies of
# its questions without answers scores as the dev file; an unanswerable one is refused (1.1).
python3 - data/full/squad/dev-v1.1.json <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
for art in d["data"]:
    for par in art["paragraphs"]:
        par["qas"] += [{"id": q["id"] + "_unlabelled", "question": q["question"]} for q in par["qas"]]
json.dump(d, open("mixed.json", "w"))
par = d["data"][0]["paragraphs"][0]
par["qas"] = [par["qas"][0], {"id": "none", "question": "what?", "answers": [], "is_impossible": True}]
d["data"] = d["data"][:1]
d["data"][0]["paragraphs"] = [par]
json.dump(d, open("impossible.json", "w"))
PYEOF
# Each output that is there already (here the first's nbest_predictions.json) needs --overwrite;
# none may land in the model's folder or on another output, --overwrite or not.
expect_exit2 "predict would write pred/nbest_predictions.json, which exists; pass --overwrite" \
  "$RPE" predict squad --model "$MODEL" --input mixed.json --out pred/mixed.json
cp "$MODEL/model.pt" model_before.pt
expect_exit2 "inside the --model folder" "$RPE" predict squad --model "$MODEL" --input mixed.json \
  --out "$MODEL/model.pt" --overwrite
cmp -s model_before.pt "$MODEL/model.pt" || fail "predict squad wrote over the model it ran"
expect_exit2 "beside it, the name --out has" "$RPE" predict squad --model "$MODEL" --input mixed.json \
  --out pred/nbest_predictions.json --overwrite
"$RPE" predict squad --model "$MODEL" --input mixed.json --out pred/mixed.json --overwrite > predict_mixed.log
grep -q "questions carry no answers: the scores are of the" predict_mixed.log || fail "no warning for a partly labelled file"
python3 - predict.log predict_mixed.log <<'PYEOF' || fail "a partly labelled file scored differently"
import sys
scores = [dict(l.split()[1:3] for l in open(f) if l.startswith("squad_v1 ")) for f in sys.argv[1:]]
assert scores[0] == scores[1], scores
PYEOF
expect_exit2 "impossible.json: question none is unanswerable" "$RPE" predict squad --model "$MODEL" \
  --input impossible.json --out pred/impossible.json --overwrite
# One short window per file: its batch pads to a multiple of 8, past the window's length, which
# is the gathered logits' width (exit 1 before the fix). Questions one "?" apart: at most one of
# the three windows has a length that is a multiple of 8.
for k in 0 1 2; do
  q="what sat$(printf ' ?%.0s' $(seq 0 $k))"
  printf '{"data":[{"paragraphs":[{"context":"the cat sat on a mat .","qas":[{"id":"s%s","question":"%s",%s' \
    "$k" "$q" '"answers":[{"text":"the cat","answer_start":0}]}]}]}]}' > short$k.json
  "$RPE" predict squad --model "$MODEL" --input short$k.json --out pred/short$k.json --overwrite > predict_short.log 2>&1 ||
    fail "predict squad on a short window ($q): $(tail -1 predict_short.log)"
  grep -q "\"s$k\"" pred/short$k.json || fail "predict squad on a short window ($q): no prediction"
done

# GLUE: RTE fine-tuned by `finetune glue --task rte`, then predicted on dev and on a test file.
ln -s "$SRC/data/sample/glue" data/full/glue
cat > glue.yaml <<'EOF'
extends: configs/finetune/tiny_glue.yaml
finetune: {glue_dir: data/full/glue, max_train_examples: 64, epochs: 1, results_file: runs/results.jsonl}
run: {root: runs, name: glue}
EOF
"$RPE" finetune glue --task rte > glue.log
GLUE_DIR=$(echo runs/glue/rte/seed*)  # a folder per GLUE task below run.name
"$RPE" predict glue --model "$GLUE_DIR/model" --input data/full/glue/RTE/dev.tsv --out pred/RTE.tsv > predict_glue.log
python3 - "$GLUE_DIR/results.json" predict_glue.log pred/RTE.tsv "$GLUE_DIR/predictions_dev.tsv" <<'PYEOF'
import json, sys
acc = json.load(open(sys.argv[1]))["dev"]["accuracy"]
printed = dict(line.split()[1:3] for line in open(sys.argv[2]) if line.startswith("rte "))
assert abs(float(printed["accuracy"]) - acc) < 1e-9, (printed, acc)
assert open(sys.argv[3]).read() == open(sys.argv[4]).read(), "predict's TSV differs from the fine-tuning run's"
print(f"predict glue = fine-tuning: RTE accuracy {acc:.2f}")
PYEOF
# Early stopping (select: best): with an lr too small to move the weights no evaluation improves
# on the first, so the run stops at the second (step 4). Its dev curve has each step once, and
# the steps since the last log line still get their training row.
"$RPE" finetune glue --task rte --run-dir runs/glue_es --set finetune.select=best --set finetune.early_stopping=1 \
  --set finetune.epochs=3 --set finetune.eval_every=2 --set finetune.eval_each_epoch=false --set train.lr=1e-12 \
  --set train.log_every=100 \
  --set finetune.results_file=runs/es.jsonl > glue_es.log
python3 - runs/glue_es/seed*/metrics.jsonl <<'PYEOF' || fail "early stopping: dev curve / training rows"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
valid = [r["step"] for r in rows if r.get("split") == "valid"]
train = [r["step"] for r in rows if "loss" in r and "split" not in r]
assert valid == [2, 4], valid
assert train == [4], train
PYEOF
# An unlabelled test file in GLUE's layout: the submission TSV keeps its index column.
printf 'index\tsentence1\tsentence2\n7\tA man is here .\tSomeone is here .\n9\tIt rains .\tThe sun shines .\n' > rte_test.tsv
"$RPE" predict glue --model "$GLUE_DIR/model" --input rte_test.tsv --out pred/RTE_test.tsv > /dev/null
python3 - pred/RTE_test.tsv <<'PYEOF'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
assert rows[0] == ["index", "prediction"] and [r[0] for r in rows[1:]] == ["7", "9"], rows
assert all(r[1] in ("entailment", "not_entailment") for r in rows[1:]), rows
PYEOF
expect_exit2 "a rte model; use .rpe-train predict glue" "$RPE" predict squad --model "$GLUE_DIR/model" \
  --input data/full/squad/dev-v1.1.json --out pred/x.json
expect_exit2 "task.json: missing" "$RPE" predict glue --model runs/glue --input rte_test.tsv --out pred/y.tsv
# A tokenizer larger than the pretrained model's vocabulary is refused before any training.
python3 -c 'print("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + ["w%d" % i for i in range(600)]))' > big_vocab.txt
expect_exit2 "big_vocab.txt has 605 pieces, more than the model's vocabulary" "$RPE" finetune glue --task rte \
  --init runs/tiny_m4 --run-dir runs/glue_big_vocab --set data.tokenizer=wordpiece --set data.tokenizer_model=big_vocab.txt
# A corrupt head size in task.json is refused before a head of that size is built.
cp -r "$GLUE_DIR/model" bad_model
python3 -c 'import json,sys; p=sys.argv[1]; j=json.load(open(p)); j["outputs"]=99999999999; json.dump(j,open(p,"w"))' \
  bad_model/task.json
expect_exit2 "bad_model/task.json: outputs 99999999999, but task rte has 2" "$RPE" predict glue --model bad_model \
  --input rte_test.tsv --out pred/z.tsv
# --out naming the --input file (however spelled) would overwrite the input with predictions:
# refused before anything is read, the input untouched.
cp data/full/squad/dev-v1.1.json same.json
expect_exit2 "out \\./same.json: predict would write \\./same.json, which is the --input file same.json" \
  "$RPE" predict squad --model "$MODEL" --input same.json --out ./same.json
cmp -s same.json data/full/squad/dev-v1.1.json || fail "predict squad changed its --input"
cp same.json pred/nbest_predictions.json
expect_exit2 "which is the --input file pred/nbest_predictions.json" "$RPE" predict squad --model "$MODEL" \
  --input pred/nbest_predictions.json --out pred/other.json
# A 1.1 model writes no null_odds.json: an input of that name beside --out is read, not refused.
cp data/full/squad/dev-v1.1.json pred/null_odds.json
"$RPE" predict squad --model "$MODEL" --input pred/null_odds.json --out pred/other.json --overwrite >/dev/null \
  || fail "predict squad refused an input named null_odds.json beside a 1.1 model's --out"
cmp -s pred/null_odds.json data/full/squad/dev-v1.1.json || fail "predict squad (1.1) wrote null_odds.json"
cp rte_test.tsv same.tsv
expect_exit2 "which is the --input file same.tsv" "$RPE" predict glue --model "$GLUE_DIR/model" --input same.tsv \
  --out "$PWD/same.tsv"
cmp -s same.tsv rte_test.tsv || fail "predict glue changed its --input"
# A labelled SQuAD file with a question whose answers are [] (no is_impossible): refused as
# evaluate-squad refuses it, not scored without that question.
python3 - data/full/squad/dev-v1.1.json <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
par = d["data"][0]["paragraphs"][0]
par["qas"] = [par["qas"][0], {"id": "empty", "question": "what?", "answers": []}]
d["data"] = [{"title": "t", "paragraphs": [par]}]
json.dump(d, open("empty_answers.json", "w"))
PYEOF
expect_exit2 "empty_answers.json: data\\[0\\].paragraphs\\[0\\].qas\\[1\\] \\(id empty\\): no answers and not is_impossible" \
  "$RPE" predict squad --model "$MODEL" --input empty_answers.json --out pred/empty.json --overwrite
expect_exit2 "qas\\[1\\] \\(id empty\\): no answers and not is_impossible" "$RPE" evaluate-squad \
  --dataset empty_answers.json --predictions pred/predictions.json
# A tokenizer.model in the folder with more pieces than the model's vocabulary: refused naming
# it, as finetune --init refuses it, not a LibTorch index error in the first batch.
python3 - <<'PYEOF'
import random
random.seed(1)
syl = "ka to ri mu se la no pi ve du zo fa gi he ju qo wy xi be co".split()
with open("wide.txt", "w") as f:
    for d in range(3000):
        for s in range(3):
            f.write(" ".join("".join(random.choice(syl) for _ in range(random.randint(1, 4))) for _ in range(12)) + "\n")
        f.write("\n")
PYEOF
"$RPE" train-tokenizer --config tiny_method4.yaml --set data.tokenizer_vocab_size=1000 --set "data.train_files=[wide.txt]" \
  --out big.model > /dev/null
cp -r "$GLUE_DIR/model" big_tok_model
cp big.model big_tok_model/tokenizer.model
expect_exit2 "big_tok_model/tokenizer.model: not the tokenizer this model was fine-tuned with" "$RPE" predict glue \
  --model big_tok_model --input rte_test.tsv --out pred/big.tsv
# A folder without the tokenizer's checksum (older ones): the piece count still stops it.
python3 -c 'import json,sys; p=sys.argv[1]; j=json.load(open(p)); del j["tokenizer_crc32"]; json.dump(j,open(p,"w"))' \
  big_tok_model/task.json
expect_exit2 "big_tok_model/tokenizer.model has 1000 pieces, more than the model's vocabulary" "$RPE" predict glue \
  --model big_tok_model --input rte_test.tsv --out pred/big.tsv
# A replaced tokenizer of fewer pieces fits the vocabulary but means other ids: fine-tuning from
# the pretrained run refuses it (its checkpoint names the tokenizer it was trained with).
"$RPE" train-tokenizer --config tiny_method4.yaml --set data.tokenizer_vocab_size=100 --set "data.train_files=[wide.txt]" \
  --out small.model > /dev/null
expect_exit2 "small.model: not the tokenizer .*tiny_m4.* was pretrained with" "$RPE" finetune glue --task rte \
  --init runs/tiny_m4 --run-dir runs/glue_other_tok --set data.tokenizer=sentencepiece --set data.tokenizer_model=small.model
# A task.json field of the wrong type or missing is named as such.
cp -r "$GLUE_DIR/model" field_model
python3 -c 'import json,sys; p=sys.argv[1]; j=json.load(open(p)); del j["select"]; j["labels"]="x"; json.dump(j,open(p,"w"))' \
  field_model/task.json
expect_exit2 "field_model/task.json: field 'labels' must be a list of strings, got \"x\"" "$RPE" predict glue \
  --model field_model --input rte_test.tsv --out pred/f.tsv
echo "saved model e2e: OK"
