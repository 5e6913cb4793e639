#!/usr/bin/env bash
# import-hf / export-hf on bad input: exit code 2 and exactly one line on stderr,
# naming the file (and tensor) at fault. Usage: test_hf_cli_errors.sh RPE_TRAIN HF_PROBE
set -u
bin="$1"; probe="$2"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
fails=0

# expect_error "what" "fragment of the message" command...
expect_error() {
  local what="$1" fragment="$2"; shift 2
  "$@" >"$work/out" 2>"$work/err"; local rc=$?
  local lines; lines=$(wc -l <"$work/err")
  if [[ $rc -ne 2 || $lines -ne 1 ]] || ! grep -qF -- "$fragment" "$work/err"; then
    echo "FAIL: $what: exit $rc, $lines stderr lines, expected exit 2 and one line with '$fragment':"; cat "$work/err"
    fails=$((fails + 1))
  else
    echo "ok: $what: $(cat "$work/err")"
  fi
}

# A valid HF folder to break, made without Python: random model -> export-hf.
"$probe" init m4 "$work/ck/model.pt" >/dev/null || { echo "FAIL: hf_probe init"; exit 1; }
"$bin" export-hf "$work/ck/model.pt" --out "$work/good" 2>/dev/null || { echo "FAIL: export-hf"; exit 1; }
"$bin" import-hf "$work/good" --out "$work/ok/model.pt" 2>/dev/null || { echo "FAIL: import-hf of a good folder"; exit 1; }

fresh() { rm -rf "$work/hf"; cp -r "$work/good" "$work/hf"; }

fresh; rm "$work/hf/config.json"
expect_error "missing config.json" "config.json: file not found" "$bin" import-hf "$work/hf" --out "$work/x.pt"
fresh; rm "$work/hf/model.safetensors"
expect_error "missing weights" "model.safetensors: file not found" "$bin" import-hf "$work/hf" --out "$work/x.pt"
fresh; rm "$work/hf/vocab.txt"
expect_error "missing vocab" "vocab.txt: file not found" "$bin" import-hf "$work/hf" --out "$work/x.pt"
expect_error "not a folder" "not a directory" "$bin" import-hf "$work/nowhere" --out "$work/x.pt"
fresh; sed -i 's/"model_type": "bert"/"model_type": "roberta"/' "$work/hf/config.json"
expect_error "model_type" "unsupported model_type 'roberta'" "$bin" import-hf "$work/hf" --out "$work/x.pt"
fresh; sed -i 's/"intermediate_size": 64/"intermediate_size": 65/' "$work/hf/config.json"
expect_error "tensor shape" "'bert.encoder.layer.0.intermediate.dense.weight' has shape [64, 32] but config.json implies [65, 32]" \
  "$bin" import-hf "$work/hf" --out "$work/x.pt"
fresh; truncate -s -100 "$work/hf/model.safetensors"
expect_error "truncated safetensors" "truncated safetensors file" "$bin" import-hf "$work/hf" --out "$work/x.pt"
fresh; truncate -s 5 "$work/hf/model.safetensors"
expect_error "safetensors without header" "truncated safetensors file" "$bin" import-hf "$work/hf" --out "$work/x.pt"
fresh; echo "{ broken" >"$work/hf/config.json"
expect_error "config.json not JSON" "config.json: not valid JSON" "$bin" import-hf "$work/hf" --out "$work/x.pt"
# A vocabulary rpe-train cannot read as WordPiece (a SentencePiece run's export: <unk> for
# [UNK]) is refused by the import, not by the first command that reads the checkpoint written.
fresh; sed -i 's/^\[UNK\]$/<unk>/' "$work/hf/vocab.txt"
expect_error "a vocabulary without [UNK]" "vocab.txt: not a BERT vocabulary (no [UNK] line); import-hf reads BERT WordPiece folders only" \
  "$bin" import-hf "$work/hf" --out "$work/x.pt"
[[ -e "$work/x.pt" ]] && { echo "FAIL: a failed import left $work/x.pt"; fails=$((fails + 1)); }

# An existing model, or another vocabulary beside --out, is replaced only with --overwrite.
expect_error "existing --out" "model.pt: exists; pass --overwrite to replace it" \
  "$bin" import-hf "$work/good" --out "$work/ok/model.pt"
"$bin" import-hf "$work/good" --out "$work/ok/model.pt" --overwrite 2>/dev/null || { echo "FAIL: import-hf --overwrite"; fails=$((fails + 1)); }
fresh; sed -i '10s/.*/zzzz/' "$work/hf/vocab.txt"
expect_error "another vocabulary beside --out" "vocab.txt holds another vocabulary" \
  "$bin" import-hf "$work/hf" --out "$work/ok/second.pt"
[[ -e "$work/ok/second.pt" ]] && { echo "FAIL: a refused import wrote second.pt"; fails=$((fails + 1)); }
"$bin" import-hf "$work/good" --out "$work/ok/same_vocab.pt" 2>/dev/null || { echo "FAIL: import beside the same vocabulary"; fails=$((fails + 1)); }

expect_error "missing checkpoint" "checkpoint not found" "$bin" export-hf "$work/none.pt" --out "$work/o"
"$probe" init absolute "$work/abs/model.pt" >/dev/null
rm "$work/abs/vocab.txt"
expect_error "export without vocabulary" "pass --vocab FILE" "$bin" export-hf "$work/abs/model.pt" --out "$work/o"

# export-hf writes its folder whole (staged, then swapped in): an existing --out is replaced only
# with --overwrite, then with nothing of it left (a stale tokenizer.json would be loaded by
# AutoTokenizer in preference to vocab.txt); never a folder that is not an HF one or that holds
# the checkpoint.
"$bin" export-hf "$work/ck/model.pt" --out "$work/re" >/dev/null 2>&1 || { echo "FAIL: export-hf into a new folder"; fails=$((fails + 1)); }
echo '{"stale": true}' >"$work/re/tokenizer.json"
expect_error "export-hf onto an existing --out" "--out $work/re: exists; pass --overwrite to replace it" \
  "$bin" export-hf "$work/ck/model.pt" --out "$work/re"
if ! "$bin" export-hf "$work/ck/model.pt" --out "$work/re" --overwrite >/dev/null 2>&1 || [[ -e "$work/re/tokenizer.json" ]] ||
   [[ ! -e "$work/re/config.json" ]] || ls "$work" | grep -q 'tmp-'; then
  echo "FAIL: export-hf --overwrite: rc or folder wrong: $(ls "$work/re") / $(ls "$work")"; fails=$((fails + 1))
else echo "ok: export-hf --overwrite leaves only the new files"; fi
mkdir -p "$work/notes"; echo keep >"$work/notes/todo.txt"
expect_error "export-hf --overwrite of a non-HF folder" "not a Hugging Face folder (no config.json); refusing to replace it" \
  "$bin" export-hf "$work/ck/model.pt" --out "$work/notes" --overwrite
expect_error "export-hf --out holding the checkpoint" "which is being exported" \
  "$bin" export-hf "$work/ck/model.pt" --out "$work/ck" --overwrite
[[ -e "$work/notes/todo.txt" && -e "$work/ck/model.pt" ]] || { echo "FAIL: a refused export deleted a file"; fails=$((fails + 1)); }

# --vocab must fit the model: no more lines than vocab_size, special tokens at the trained ids.
{ cat "$work/ck/vocab.txt"; echo extra1; echo extra2; } >"$work/big_vocab.txt"
expect_error "--vocab longer than vocab_size" "big_vocab.txt: 52 lines but the model's vocab_size is 50" \
  "$bin" export-hf "$work/ck/model.pt" --out "$work/v1" --vocab "$work/big_vocab.txt"
sed '2s/.*/[CLS]/; 3s/.*/[UNK]/' "$work/ck/vocab.txt" >"$work/swapped_vocab.txt"
expect_error "--vocab with [UNK] elsewhere" "swapped_vocab.txt: [UNK] is at id 2, but the model was trained with it at id 1" \
  "$bin" export-hf "$work/ck/model.pt" --out "$work/v2" --vocab "$work/swapped_vocab.txt"
head -n 40 "$work/ck/vocab.txt" >"$work/short_vocab.txt"  # fewer lines: accepted, as HF and import-hf accept it
"$bin" export-hf "$work/ck/model.pt" --out "$work/v3" --vocab "$work/short_vocab.txt" >/dev/null 2>&1 ||
  { echo "FAIL: --vocab shorter than vocab_size"; fails=$((fails + 1)); }
[[ -e "$work/v1" || -e "$work/v2" ]] && { echo "FAIL: a refused export left a folder"; fails=$((fails + 1)); }

# Hints: a fine-tuning seed folder instead of its model, an HF folder instead of a checkpoint,
# and a fine-tuned model folder without its vocab.txt (where --vocab is refused).
"$probe" init-finetuned m4 mnli "$work/seed1/model" >/dev/null || { echo "FAIL: hf_probe init-finetuned"; exit 1; }
expect_error "export-hf of a seed folder" "a fine-tuning seed folder; its model is $work/seed1/model" \
  "$bin" export-hf "$work/seed1" --out "$work/o"
expect_error "export-hf of an HF folder" "a Hugging Face folder, not an rpe-train checkpoint (convert it with import-hf)" \
  "$bin" export-hf "$work/good" --out "$work/o"
rm "$work/seed1/model/vocab.txt"
expect_error "fine-tuned model without vocab.txt" \
  "model/vocab.txt: missing from the fine-tuned model folder (it carries the tokenizer it was trained with): copy vocab.txt back" \
  "$bin" export-hf "$work/seed1/model" --out "$work/o"

# A relative model fine-tuned on windows longer than max_position (hf_probe's finetune.max_seq_len
# is 384, its max_position 24) is exported with a warning: HF cannot run those windows.
"$probe" init-finetuned m4 squad_v1 "$work/long/model" >/dev/null && "$probe" init-finetuned absolute squad_v1 "$work/abs_ft/model" >/dev/null
if "$bin" export-hf "$work/long/model" --out "$work/long_hf" >"$work/out" 2>&1 &&  # logs go to stdout
   grep -qF "fine-tuned on windows of up to 384 tokens (finetune.max_seq_len), but HF BERT takes at most max_position_embeddings = 24" "$work/out" &&
   "$bin" export-hf "$work/abs_ft/model" --out "$work/abs_ft_hf" >"$work/out" 2>&1 && ! grep -q "windows of up to" "$work/out"; then
  echo "ok: long fine-tuning windows of a relative model are warned about at export"
else echo "FAIL: no warning about fine-tuning windows past max_position: $(cat "$work/out")"; fails=$((fails + 1)); fi

echo "$fails failure(s)"
[[ $fails -eq 0 ]]
