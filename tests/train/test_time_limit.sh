#!/usr/bin/env bash
# train.time_limit_min end to end: a pretraining run past its time limit stops after a step with
# a checkpoint and exit code 75 (not finished: no summary.json), and `--resume` (here without the
# limit) ends with the same final checkpoint, byte for byte, as a run that was never stopped.
# Usage: test_time_limit.sh RPE_TRAIN_BINARY SOURCE_DIR
set -euo pipefail
bin=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
head -n 400 "$src/data/sample/corpus.txt" >"$work/corpus.txt"
cfg=$src/configs/pretrain/tiny_absolute.yaml
sets=(--set "data.train_files=[$work/corpus.txt]" --set data.tokenizer_vocab_size=200 --set data.max_seq_len=32
      --set model.hidden=32 --set model.layers=2 --set model.heads=2 --set model.ffn=64 --set model.max_position=32
      --set train.batch_size=8 --set train.max_steps=6 --set train.log_every=2 --set train.eval_every=0
      --set train.eval_batches=1 --set train.device=cpu --set train.threads=1)
"$bin" pretrain --config "$cfg" --run-dir "$work/straight" "${sets[@]}" >"$work/straight.log" 2>&1 \
  || { cat "$work/straight.log"; exit 1; }
sets+=(--set "data.tokenizer_model=$work/straight/tokenizer.model")
"$bin" pretrain --config "$cfg" --run-dir "$work/straight2" "${sets[@]}" >"$work/straight2.log" 2>&1 \
  || { cat "$work/straight2.log"; exit 1; }

# A limit that has passed by the first step (6 ms): the run stops after step 1.
code=0
"$bin" pretrain --config "$cfg" --run-dir "$work/limited" "${sets[@]}" --set train.time_limit_min=0.0001 \
  >"$work/limited.log" 2>&1 || code=$?
if (( code != 75 )); then echo "exit code $code, expected 75"; cat "$work/limited.log"; exit 1; fi
line="stopped at the time limit (train.time_limit_min 0.0001) after step 1 of 6; checkpoint $work/limited/checkpoints/step_00000001.pt"
grep -qF "$line" "$work/limited/train.log" || { echo "train.log lacks: $line"; cat "$work/limited/train.log"; exit 1; }
grep -qE "\[train\] checkpoint $work/limited/checkpoints/step_00000001.pt written \([0-9]+ MiB, [0-9.]+ s\)" "$work/limited/train.log" \
  || { echo "train.log does not say the checkpoint was written, its size and time"; exit 1; }
[[ $(cat "$work/limited/checkpoints/latest") == step_00000001.pt ]] || { echo "latest checkpoint is not step 1"; exit 1; }
[[ ! -e $work/limited/summary.json ]] || { echo "summary.json written by a run that did not finish"; exit 1; }

# A restart with no step left (the limit passed during its startup) evaluates and ends: it must not
# stop at the limit again at every restart.
last=(--set train.max_steps=1 --set train.time_limit_min=0.0001)
code=0
"$bin" pretrain --config "$cfg" --run-dir "$work/last" "${sets[@]}" "${last[@]}" >"$work/last.log" 2>&1 || code=$?
(( code == 75 )) || { echo "one-step run: exit code $code, expected 75"; cat "$work/last.log"; exit 1; }
"$bin" pretrain --config "$cfg" --run-dir "$work/last" --resume "${sets[@]}" "${last[@]}" >>"$work/last.log" 2>&1 \
  || { echo "a restart with no step left did not finish"; cat "$work/last.log"; exit 1; }
[[ -e $work/last/summary.json ]] || { echo "no summary.json after the restart with no step left"; exit 1; }

"$bin" pretrain --config "$cfg" --run-dir "$work/limited" --resume "${sets[@]}" >>"$work/limited.log" 2>&1 \
  || { cat "$work/limited.log"; exit 1; }
a=$work/straight2/checkpoints/$(cat "$work/straight2/checkpoints/latest")
b=$work/limited/checkpoints/$(cat "$work/limited/checkpoints/latest")
cmp "$a" "$b" || { echo "final checkpoints differ: $a $b"; exit 1; }
echo "time limit: exit 75 after step 1, resumed to a final checkpoint identical to an unstopped run's"
