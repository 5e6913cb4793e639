#!/usr/bin/env bash
# Runs scripts/kill_resume_check.sh on a small CPU config: 4 random SIGKILLs, each followed by
# --resume, must end with the same final checkpoint, metrics.jsonl and summary.json (timings
# aside) as an uninterrupted run. With SIGNAL (TERM): 3 stops on request instead, each losing no
# step, and no periodic checkpoints (save_every 0): only the stops' checkpoints carry the run.
# Usage: test_kill_resume.sh RPE_TRAIN_BINARY SOURCE_DIR [SIGNAL]
set -euo pipefail
bin=$1 src=$2 sig=${3:-KILL}
kills=4 save_every=5 steps=60
[[ $sig == KILL ]] || kills=3 save_every=0 steps=200  # longer: a stop lands in the loop, not after it
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
head -n 600 "$src/data/sample/corpus.txt" >"$work/corpus.txt"
cfg=$src/configs/pretrain/tiny_absolute.yaml
# One tokenizer for both runs (a kill during tokenizer training is not what this tests).
"$bin" pretrain --config "$cfg" --run-dir "$work/tok" --set "data.train_files=[$work/corpus.txt]" \
  --set data.tokenizer_vocab_size=200 --set train.max_steps=1 --set train.eval_batches=1 --set train.device=cpu \
  >"$work/tok.log" 2>&1 || { cat "$work/tok.log"; exit 1; }
bash "$src/scripts/kill_resume_check.sh" --signal "$sig" "$bin" "$cfg" "$work/runs" "$kills" -- \
  --set "data.train_files=[$work/corpus.txt]" --set "data.tokenizer_model=$work/tok/tokenizer.model" --set data.max_seq_len=64 \
  --set model.hidden=64 --set model.layers=2 --set model.heads=2 --set model.ffn=128 --set model.max_position=64 \
  --set train.batch_size=16 --set train.max_steps=$steps --set train.save_every=$save_every --set train.log_every=5 \
  --set train.eval_every=0 --set train.eval_batches=2 --set train.device=cpu --set train.threads=1
