#!/usr/bin/env bash
# The standard launch, end to end: `torchrun --no-python --nproc-per-node=2 rpe-train pretrain`
# on CPU must run and match a single-process run with the same global batch (dropout off):
# equal final training and held-out MLM losses (to 1e-5) in summary.json.
# Usage: test_torchrun.sh RPE_TRAIN_BINARY SOURCE_DIR. Without torchrun it exits 77, which
# tests.cmake declares as ctest's skip code (SKIP_RETURN_CODE): a skip, not a pass.
set -euo pipefail
bin=$1 src=$2
torchrun=$src/.venv/bin/torchrun
if [[ ! -x $torchrun ]]; then echo "SKIP: no $torchrun"; exit 77; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
head -n 600 "$src/data/sample/corpus.txt" >"$work/corpus.txt"
sets=(--set "data.train_files=[$work/corpus.txt]" --set data.tokenizer_vocab_size=200 --set data.max_seq_len=32
      --set model.hidden=32 --set model.layers=2 --set model.heads=2 --set model.ffn=64 --set model.max_position=32
      --set model.dropout=0 --set model.attention_dropout=0 --set train.batch_size=8 --set train.max_steps=6
      --set train.log_every=3 --set train.eval_every=0 --set train.eval_batches=2 --set train.device=cpu
      --set train.threads=1)
cfg=$src/configs/pretrain/tiny_absolute.yaml
"$bin" pretrain --config "$cfg" --run-dir "$work/single" "${sets[@]}" >"$work/single.log" 2>&1 \
  || { cat "$work/single.log"; exit 1; }
# The tokenizer trained by the single run is reused so both runs see the same pieces.
sets+=(--set "data.tokenizer_model=$work/single/tokenizer.model")
"$bin" pretrain --config "$cfg" --run-dir "$work/single2" "${sets[@]}" >"$work/single2.log" 2>&1 \
  || { cat "$work/single2.log"; exit 1; }
# TMPDIR: torchrun keeps its per-run folder (torchelastic_*) there; removed with $work.
TMPDIR=$work timeout 300 "$torchrun" --no-python --nproc-per-node=2 --master-port=$((20000 + RANDOM % 20000)) \
  "$bin" pretrain --config "$cfg" --run-dir "$work/pair" "${sets[@]}" >"$work/pair.log" 2>&1 \
  || { cat "$work/pair.log"; exit 1; }
grep -q "rank 0/2" "$work/pair.log" || { echo "torchrun did not start 2 ranks"; cat "$work/pair.log"; exit 1; }
# With gloo's headers installed (libgloo-dev) the CPU backend must be Gloo, not the fallback.
if [[ -f /usr/include/gloo/context.h ]]; then
  grep -q "backend gloo" "$work/pair.log" || { echo "expected the Gloo backend"; grep "backend" "$work/pair.log"; exit 1; }
fi
python3 - "$work/single2/summary.json" "$work/pair/summary.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert b["world_size"] == 2, b
for key in ("final_loss", "valid_loss"):
    if abs(a[key] - b[key]) > 1e-5:
        sys.exit(f"{key}: single {a[key]} vs 2 ranks {b[key]}")
print(f"torchrun 2 ranks match: final_loss {a['final_loss']:.6f} / {b['final_loss']:.6f}, "
      f"valid_loss {a['valid_loss']:.6f} / {b['valid_loss']:.6f}")
PY
