#!/usr/bin/env bash
# The standard launch, end to end: `torchrun --no-python --nproc-per-node=2 rpe-train pretrain`
# on CPU must run and match a single-process run with the same global batch (dropout off):
# equal final training and held-out MLM losses (to 1e-5) in summary.json; that run resumed by
# one process equals one process throughout. Then the same for
# `rpe-train finetune squad` from that model: equal last logged training loss (to 1e-5) and
# equal dev EM/F1; and a GLUE dev set scored by 2 ranks (select: best) as by one.
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
# A warning every rank would give alike (the config's warmup is longer than the run) is rank 0's alone.
n=$(grep -c "train.warmup_steps (50) exceeds train.max_steps (6)" "$work/pair.log" || true)
(( n == 1 )) || { echo "the config's warning logged $n times by 2 ranks, not once"; cat "$work/pair.log"; exit 1; }
# With gloo's headers installed (libgloo-dev) the CPU backend must be Gloo, not the fallback.
if [[ -f /usr/include/gloo/context.h ]]; then
  grep -q "backend gloo" "$work/pair.log" || { echo "expected the Gloo backend"; grep "backend" "$work/pair.log"; exit 1; }
fi
python3 - "$work/single2/summary.json" "$work/pair/summary.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert b["world_size"] == 2, b
assert b["world_sizes"] == [{"first_step": 1, "last_step": 6, "world_size": 2}], b["world_sizes"]
for key in ("final_loss", "valid_loss"):
    if abs(a[key] - b[key]) > 1e-5:
        sys.exit(f"{key}: single {a[key]} vs 2 ranks {b[key]}")
print(f"torchrun 2 ranks match: final_loss {a['final_loss']:.6f} / {b['final_loss']:.6f}, "
      f"valid_loss {a['valid_loss']:.6f} / {b['valid_loss']:.6f}")
PY
# FLOP/s per device: each row's model_tflops_per_device / tokens_per_s (the model FLOPs of a
# token over the ranks) is half as large on 2 ranks as on one.
python3 - "$work/single2/metrics.jsonl" "$work/pair/metrics.jsonl" <<'PY'
import json, sys
def per_token(f):
    rows = [json.loads(l) for l in open(f)]
    return {r["model_tflops_per_device"] / r["tokens_per_s"] for r in rows if "tokens_per_s" in r}
one, two = (per_token(f) for f in sys.argv[1:3])
assert len(one) >= 1 and len(two) >= 1, (one, two)
for a in one:
    for b in two:
        if abs(b / a - 0.5) > 1e-9:
            sys.exit(f"model FLOP/s per device: {b} per token/s on 2 ranks, {a} on one (expected half)")
print(f"model FLOP/s per device on 2 ranks: half of one process's per token/s ({min(two):.3e})")
PY

# A run may continue on another number of ranks (a node lost, or added): the data position is
# global and rank 0's RNG state is every rank's. The pair's run, resumed by one process for 4
# more steps, must equal one process training 10 steps.
"$bin" pretrain --config "$cfg" --run-dir "$work/pair" --resume "${sets[@]}" --set train.max_steps=10 \
  >"$work/pair_resumed.log" 2>&1 || { cat "$work/pair_resumed.log"; exit 1; }
"$bin" pretrain --config "$cfg" --run-dir "$work/single10" "${sets[@]}" --set train.max_steps=10 \
  >"$work/single10.log" 2>&1 || { cat "$work/single10.log"; exit 1; }
grep -q "resumed from .*step_00000006.pt at step 6" "$work/pair_resumed.log" \
  || { echo "the 1-process run did not resume the pair's checkpoint"; cat "$work/pair_resumed.log"; exit 1; }
python3 - "$work/single10/summary.json" "$work/pair/summary.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert b["world_size"] == 1 and b["steps"] == 10, b
assert b["world_sizes"] == [{"first_step": 1, "last_step": 6, "world_size": 2},
                            {"first_step": 7, "last_step": 10, "world_size": 1}], b["world_sizes"]
for key in ("final_loss", "valid_loss"):
    if abs(a[key] - b[key]) > 1e-5:
        sys.exit(f"{key}: 1 process for 10 steps {a[key]} vs 2 ranks for 6, then 1 process {b[key]}")
print(f"2 ranks then 1 process match 1 process: valid_loss {a['valid_loss']:.6f} / {b['valid_loss']:.6f}")
PY
# The cost table names both stretches and gives each window's tokens/s per rank.
"$bin" tables cost --runs "$work/pair" --out "$work/cost" >"$work/cost.log" 2>&1 || { cat "$work/cost.log"; exit 1; }
python3 - "$work/cost/cost.json" <<'PY'
import json, sys
row = json.load(open(sys.argv[1]))["rows"][0]
assert [s["world_size"] for s in row["ranks"]] == [2, 1], row
assert row["tokens/s per rank (median)"] > 0, row
print(f"cost table: ranks {row['ranks']}, tokens/s per rank {row['tokens/s per rank (median)']:.0f}")
PY

# Fine-tuning through the same engine: 2 ranks against 1 from the pretrained model above.
ft_sets=(--init "$work/single2" --seeds 1 --set finetune.max_seq_len=32 --set finetune.doc_stride=16
         --set finetune.max_query_len=12 --set finetune.max_train_examples=64 --set finetune.max_eval_examples=60
         --set finetune.eval_batch_size=8
         --set finetune.epochs=1 --set train.device=cpu --set train.threads=1 --set model.dropout=0
         --set model.attention_dropout=0)
cd "$src"  # tiny_squad.yaml names the SQuAD sample relative to the repository
"$bin" finetune squad --config configs/finetune/tiny_squad.yaml --run-dir "$work/ft_single" "${ft_sets[@]}" \
  --set finetune.results_file="$work/ft_single.jsonl" >"$work/ft_single.log" 2>&1 || { cat "$work/ft_single.log"; exit 1; }
TMPDIR=$work timeout 300 "$torchrun" --no-python --nproc-per-node=2 --master-port=$((20000 + RANDOM % 20000)) \
  "$bin" finetune squad --config configs/finetune/tiny_squad.yaml --run-dir "$work/ft_pair" "${ft_sets[@]}" \
  --set finetune.results_file="$work/ft_pair.jsonl" >"$work/ft_pair.log" 2>&1 || { cat "$work/ft_pair.log"; exit 1; }
grep -q "x 2 ranks" "$work/ft_pair.log" || { echo "fine-tuning did not run on 2 ranks"; cat "$work/ft_pair.log"; exit 1; }
# Rank 0 alone names the run folder and prints the results.
[ "$(grep -c '^run folder:' "$work/ft_pair.log")" = 1 ] || { echo "expected one 'run folder:' line"; cat "$work/ft_pair.log"; exit 1; }
python3 - "$work/ft_single/seed1" "$work/ft_pair/seed1" <<'PY'
import json, sys
def last_loss(d):
    rows = [json.loads(l) for l in open(f"{d}/metrics.jsonl")]
    return [r for r in rows if "loss" in r and r.get("split") != "valid"][-1]
(a, b), (ra, rb) = (last_loss(d) for d in sys.argv[1:3]), (json.load(open(f"{d}/results.json")) for d in sys.argv[1:3])
assert a["step"] == b["step"] and a["step"] > 0, (a, b)
if abs(a["loss"] - b["loss"]) > 1e-5:
    sys.exit(f"fine-tuning loss at step {a['step']}: single {a['loss']} vs 2 ranks {b['loss']}")
for key in ("exact", "f1"):
    if ra[key] != rb[key]:
        sys.exit(f"fine-tuning dev {key}: single {ra[key]} vs 2 ranks {rb[key]}")
print(f"torchrun 2 ranks fine-tune alike: loss {a['loss']:.6f} / {b['loss']:.6f} at step {a['step']}, "
      f"EM {rb['exact']:.2f}, F1 {rb['f1']:.2f}")
PY

# The dev set split over the ranks (dist/sharded_eval.h), with select: best reloading an earlier
# model on rank 0: its scores must reach rank 1 too, whose batches (of 8) the final weights
# would score otherwise. STS-B's scores are continuous, so the final evaluation of the kept
# model must give exactly the dev row the periodic evaluation wrote at that step.
glue_sets=(--init "$work/single2" --seeds 1 --set finetune.max_seq_len=32 --set finetune.max_train_examples=64
           --set finetune.epochs=4 --set finetune.select=best --set train.lr=1e-3 --set finetune.eval_batch_size=8
           --set train.device=cpu --set train.threads=1 --set model.dropout=0 --set model.attention_dropout=0)
TMPDIR=$work timeout 300 "$torchrun" --no-python --nproc-per-node=2 --master-port=$((20000 + RANDOM % 20000)) \
  "$bin" finetune glue --task stsb --config configs/finetune/tiny_glue.yaml --run-dir "$work/glue_pair" "${glue_sets[@]}" \
  --set finetune.results_file="$work/glue_pair.jsonl" >"$work/glue_pair.log" 2>&1 || { cat "$work/glue_pair.log"; exit 1; }
python3 - "$work/glue_pair/seed1" <<'PY'
import json, sys
d = sys.argv[1]
r = json.load(open(f"{d}/results.json"))
rows = {m["step"]: m for m in map(json.loads, open(f"{d}/metrics.jsonl")) if m.get("split") == "valid"}
if not r["model_step"] < r["steps"]:
    sys.exit(f"STS-B kept the final model (step {r['model_step']} of {r['steps']}): the reload is not exercised")
at_kept = {k: rows[r["model_step"]][k] for k in ("pearson", "spearman")}
if r["dev"] != at_kept:
    sys.exit(f"STS-B kept model of step {r['model_step']} scores {r['dev']} at the end, {at_kept} when it was trained")
if open(f"{d}/predictions_dev.tsv").read().count("\n") <= 9:
    sys.exit("STS-B dev set of fewer than two batches")
print(f"torchrun 2 ranks score the reloaded model of step {r['model_step']} of {r['steps']} as when it was kept: "
      f"Pearson {r['dev']['pearson']:.4f}")
PY
