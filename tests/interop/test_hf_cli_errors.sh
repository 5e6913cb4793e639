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

echo "$fails failure(s)"
[[ $fails -eq 0 ]]
