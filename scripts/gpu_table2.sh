#!/usr/bin/env bash
# Second stage of the GPU check (issue 14; docs/gpu.md): Table 2 of Huang et al. 2020 at mini
# scale on real data -- the mini_* presets (4 layers, hidden 256, L = 128, bf16) for the methods
# the paper's Table 2 reports (`rpe-train methods --names --paper-table 2`; --methods), pretrained
# on the packed English corpus with BERT's uncased WordPiece vocabulary, fine-tuned on SQuAD 1.1
# train and scored on its dev set -- sized to a time budget:
#   1. unpacks SQuAD and prepares the shards once (--data: the folder scripts/pack_data.sh wrote);
#   2. measures every method's step time at the run's shape (rpe-bench-model) and sizes the
#      pretraining steps so that the whole stage fits --minutes (bench/table2_plan.py -> plan.json);
#   3. runs scripts/reproduce/table2.sh --scale mini with that plan;
#   4. writes the tables, loss curves (PNG) and plan to bench/results/table2_mini_<device>/.
# Run it again with the same --out to continue an interrupted stage: the plan is kept, finished
# runs are skipped and an interrupted pretraining resumes from its last checkpoint. On a fresh
# machine the --out folder may be the slim copy scripts/gpu_call.sh packed (no checkpoints): an
# interrupted pretraining then starts over, and a method pretrained but not yet fine-tuned is
# pretrained again.
# --build-dir: gpu_check.sh's build (build-gpu) or one carried by scripts/pack_build.sh, with the
# libraries of --deps (scripts/pack_deps.sh) -- a session that only runs this stage need not build.
# --call-minutes C: this command may run C minutes at most (a machine that stops commands at a
# limit): before each method it checks that the plan's estimate of what the method still needs
# fits in what is left of C, and otherwise stops there, cleanly, with exit status 3 -- run the
# same command again to continue (a run cut by the limit would lose its fine-tuning).
# --device cpu: the same stage at the same mini shape on this machine's CPU (a real-data check
# of the whole path before GPU time is spent on it; results in bench/results/table2_mini_cpu).
# --squad-train-examples N: fine-tune on SQuAD train's first N questions only (0 = all), which
# lets a slow device give its pretraining most of the budget; the dev set is always whole.
# --cpu-smoke: the same four steps on the CPU at toy size (ctest gpu_table2_cpu_smoke).
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=gpu-data MINUTES=25 METHODS="" SEEDS=1 EPOCHS=2
BUILD=build-gpu DEPS=deps PY=.venv/bin/python OUT="" SMOKE=0 CALL_MIN=0 DEVICE=cuda SQUAD_N=0
while (($#)); do
  case $1 in
    --data) DATA=$2; shift ;;
    --minutes) MINUTES=$2; shift ;;
    --methods) METHODS=$2; shift ;;
    --seeds) SEEDS=$2; shift ;;
    --epochs) EPOCHS=$2; shift ;;
    --build-dir) BUILD=$2; shift ;;
    --deps) DEPS=$2; shift ;;
    --python) PY=$2; shift ;;
    --out) OUT=$2; shift ;;
    --call-minutes) CALL_MIN=$2; shift ;;
    --device) DEVICE=$2; shift ;;
    --squad-train-examples) SQUAD_N=$2; shift ;;
    --cpu-smoke) SMOKE=1 ;;
    *) echo "usage: $0 [--data DIR] [--minutes M] [--methods a,b] [--seeds 1,2] [--epochs E] [--build-dir DIR]" \
            "[--deps DIR] [--python PY] [--out DIR] [--call-minutes C] [--device cuda|cpu] [--squad-train-examples N]" \
            "[--cpu-smoke]" >&2; exit 2 ;;
  esac
  shift
done
((SMOKE)) && DEVICE=cpu
[[ $DEVICE == cuda || $DEVICE == cpu ]] || { echo "gpu_table2.sh: --device: cuda or cpu, not '$DEVICE'" >&2; exit 2; }
[[ $SQUAD_N =~ ^[0-9]+$ ]] || { echo "gpu_table2.sh: --squad-train-examples: a count (0 = all), not '$SQUAD_N'" >&2; exit 2; }
T0=$(date +%s)
say() { echo "[gpu_table2 $(date -u +%H:%M:%S)] $*"; }
fail() { echo "[gpu_table2] FAILED: $*" >&2; exit 1; }
command -v "$PY" >/dev/null || fail "no Python at $PY (--python)"
PY=$(command -v "$PY")
source scripts/gpu_env.sh
gpu_env "$PY" "$DEPS" "$BUILD"  # carried libraries (--deps, pack_deps.sh) and build (pack_build.sh), torch's lib
for b in rpe-train rpe-bench-model; do [[ -x $BUILD/$b ]] || fail "no $BUILD/$b (build first, or --build-dir)"; done
gpu_same_torch "$PY" "$BUILD"
for f in vocab.txt corpus.txt.gz squad/train-v1.1.json.gz squad/dev-v1.1.json.gz; do
  [[ -f $DATA/$f ]] || fail "$DATA/$f not found (make the folder with scripts/pack_data.sh; --data)"
done
DATA=$(cd "$DATA" && pwd)
# By default the paper's Table 2 methods, absolute and m4 (its baseline and favourite) first: a
# stage that spans calls and sessions has the headline pair before the others.
[[ -n $METHODS ]] || METHODS=$("$BUILD/rpe-train" methods --names --paper-table 2 \
  | awk '$0 == "absolute" || $0 == "m4" { print; next } { rest = rest $0 "\n" } END { printf "%s", rest }' | paste -sd,)
source scripts/device_name.sh
device_name "$PY" "$DEVICE"  # DEVNAME, SLUG
if ((SMOKE)); then
  OUT=${OUT:-$(mktemp -d)} REPORT=$OUT/report CAP=12 MIN=4 EPOCHS=1 FT_BATCH=16
  model=(model.hidden=32 model.layers=2 model.heads=2 model.ffn=64 train.batch_size=16 train.threads=1
         data.valid_fraction=0.34)  # 2 of the sample's 6 documents held out
  ft=(finetune.eval_batch_size=32 train.threads=1)
  shape=(--hidden 32 --layers 2 --heads 2 --ffn 64 --steps 2 --warmup 1) PRE_TOKENS=2048
else
  OUT=${OUT:-bench/results/table2_run_$SLUG} REPORT=bench/results/table2_mini_$SLUG CAP=5000 MIN=200
  FT_BATCH=32  # configs/finetune/mini_squad.yaml's batch, set explicitly below so plan and runs agree
  model=() ft=()
  shape=(--hidden 256 --layers 4 --heads 4 --ffn 1024 --steps 10 --warmup 3) PRE_TOKENS=16384  # mini: 128 x 128
fi
mkdir -p "$OUT/squad"
OUT=$(cd "$OUT" && pwd)
IFS=, read -r -a seed_list <<<"$SEEDS"

# ---- 1. data: SQuAD unpacked, shards prepared (both no-ops when done) ------------------------
for f in train-v1.1.json dev-v1.1.json; do
  [[ -f $OUT/squad/$f ]] || { gzip -dc "$DATA/squad/$f.gz" >"$OUT/squad/$f.tmp" && mv "$OUT/squad/$f.tmp" "$OUT/squad/$f"; }
done
pre=(data.tokenizer_model="$DATA/vocab.txt" data.shards="$OUT/shards" train.device=$DEVICE "${model[@]}")
pre_sets=()
for s in "data.train_files=[$DATA/corpus.txt.gz]" "${pre[@]}"; do pre_sets+=(--set "$s"); done
say "prepare the shards (BERT uncased WordPiece) in $OUT/shards"
"$BUILD/rpe-train" prepare-data --config mini_absolute.yaml "${pre_sets[@]}" >"$OUT/prepare.log" 2>&1 \
  || { tail -5 "$OUT/prepare.log"; fail "prepare-data ($OUT/prepare.log)"; }
tail -1 "$OUT/prepare.log"

# ---- 2. plan: measured step times -> steps per method that fit the budget -------------------
if [[ ! -f $OUT/plan.json ]]; then
  say "measure the step time of $METHODS at the run's shape"
  for b in pretrain:$PRE_TOKENS finetune:$((FT_BATCH * 128)); do  # the fine-tuning batch is measured on its own
    "$BUILD/rpe-bench-model" --device $DEVICE --methods "$METHODS" --lengths 128 --vocab 30522 "${shape[@]}" \
      --batch-tokens "${b#*:}" >"$OUT/plan_bench_${b%:*}.jsonl" 2>"$OUT/plan_bench.log" \
      || { tail -5 "$OUT/plan_bench.log"; fail "rpe-bench-model"; }
  done
  plan_for() {  # plan_for EPOCHS METHODS: plan.json, or status 1 when it does not fit
    "$PY" bench/table2_plan.py --bench "$OUT/plan_bench_pretrain.jsonl" --bench-finetune "$OUT/plan_bench_finetune.jsonl" \
      --finetune-batch $FT_BATCH --squad-train "$OUT/squad/train-v1.1.json" \
      --squad-dev "$OUT/squad/dev-v1.1.json" --budget-s $((MINUTES * 60)) --spent-s $(($(date +%s) - T0)) \
      --squad-train-examples "$SQUAD_N" --seeds ${#seed_list[@]} --epochs "$1" --methods "$2" \
      --max-steps $CAP --min-steps $MIN --out "$OUT/plan.json"
  }
  # What fits, in this order: as asked (the planner itself takes one epoch of SQuAD instead when
  # that buys the pretraining 1.5x the steps); one epoch; one epoch for the paper's two headline
  # rows (absolute, m4). Step times on a device never measured before decide, not a
  # guess made here: GPU time is not spent on a stage that would end with "no plan fits".
  if plan_for "$EPOCHS" "$METHODS"; then :
  elif [[ $EPOCHS != 1 ]] && plan_for 1 "$METHODS"; then
    say "warning: $METHODS with $EPOCHS epochs of SQuAD do not fit --minutes $MINUTES; fine-tuning 1 epoch (plan.json)"
  elif [[ ,$METHODS, == *,absolute,* && ,$METHODS, == *,m4,* && $METHODS != absolute,m4 ]] && plan_for 1 absolute,m4; then
    say "warning: $METHODS do not fit --minutes $MINUTES even with 1 epoch; running absolute and m4 only, 1 epoch (plan.json)"
  else
    fail "no plan fits --minutes $MINUTES (see above)"
  fi
else
  say "continuing with the plan in $OUT/plan.json"
fi
# plan KEY [DEFAULT]: a value of plan.json; a key missing without a DEFAULT is an error.
plan() {
  "$PY" -c "import json,sys; p=json.load(open(sys.argv[1])); print(p[sys.argv[2]] if len(sys.argv) < 4 else p.get(sys.argv[2], sys.argv[3]))" \
    "$OUT/plan.json" "$@"
}
# The plan counted the fine-tuning's questions: a rerun must fine-tune on as many (plans from
# before the option counted all of them).
planned_n=$(plan squad_train_examples 0)
[[ $planned_n == "$SQUAD_N" ]] \
  || fail "$OUT/plan.json was made with --squad-train-examples $planned_n, not $SQUAD_N (same options, or a new --out)"
steps=$(plan steps)
# The methods and epochs the plan was made for (it may have shrunk them to fit), whatever this
# call's options say: a continuing run must not change its experiment halfway.
# (Plans from before the field keep this call's.)
EPOCHS=$(plan epochs "$EPOCHS" | sed 's/\.0$//')
METHODS=$("$PY" -c "import json,sys; print(','.join(json.load(open(sys.argv[1])).get('methods', [])) or sys.argv[2])" \
  "$OUT/plan.json" "$METHODS")
run=(train.max_steps=$steps train.warmup_steps=$(plan warmup_steps) train.eval_every=$(plan eval_every)
     train.save_every=$(plan save_every) train.log_every=$(plan log_every))

# ---- 3. Table 2 at mini scale ----------------------------------------------------------------
args=(--scale mini --out "$OUT/reproduce" --seeds "$SEEDS" --corpus "$DATA/corpus.txt.gz"
      --squad-dir "$OUT/squad" --rpe-train "$BUILD/rpe-train" --python "$PY")
for s in "${pre[@]}" "${run[@]}"; do args+=(--pretrain-set "$s"); done
for s in finetune.epochs="$EPOCHS" finetune.max_train_examples="$SQUAD_N" train.batch_size=$FT_BATCH train.precision=bf16 train.device=$DEVICE "${ft[@]}"; do args+=(--finetune-set "$s"); done
table2() {  # table2 METHODS: scripts/reproduce/table2.sh for them (finished runs skipped)
  # pipefail: the pipeline fails when table2.sh does (the grep may match nothing)
  if ! scripts/reproduce/table2.sh "${args[@]}" --methods "$1" 2>&1 | tee -a "$OUT/table2.log" \
       | { grep -E '^\[reproduce' || true; }; then
    tail -20 "$OUT/table2.log"
    fail "scripts/reproduce/table2.sh ($OUT/table2.log)"
  fi
}
# Seconds method $1 still needs by the plan's estimates (its finished runs need none).
left_s() {
  "$PY" - "$OUT" "$1" "$SEEDS" <<'PY'
import json, sys
from pathlib import Path
out, m, seeds = Path(sys.argv[1]), sys.argv[2], sys.argv[3].split(",")
plan = json.loads((out / "plan.json").read_text())
r, start, need = plan["per_method"][m], plan["start_s"], 0.0
if not (out / "reproduce/pretrain" / m / "summary.json").exists():
    need += start + plan["steps"] * r["step_ms"] / 1000
for seed in seeds:
    if not (out / f"reproduce/finetune/table2/{m}_s{seed}/seed{seed}/results.json").exists():
        need += start + r["finetune_s"]
print(round(need))
PY
}
# Run folders that came back from a call whose machine is gone (scripts/gpu_call.sh) hold no
# checkpoints (~130 MB each at mini size, past a call's 64 MiB carry). A pretraining cut off
# there cannot resume (rpe-train refuses metrics past a checkpoint it lacks): it starts over. A
# finished one whose fine-tuning is still to run needs its checkpoints: it is pretrained again.
refresh_pretraining() {
  local dir=$OUT/reproduce/pretrain/$1 seed
  compgen -G "$dir/checkpoints/*.pt" >/dev/null && return 0
  if [[ -d $dir && ! -f $dir/summary.json ]]; then
    say "pretrain $1: interrupted, and no checkpoint of it is here to resume from: starting it over"
    rm -rf "$dir"
    return 0
  fi
  [[ -f $dir/summary.json ]] || return 0
  for seed in "${seed_list[@]}"; do
    if [[ ! -f $OUT/reproduce/finetune/table2/$1_s$seed/seed$seed/results.json ]]; then
      say "pretrain $1: finished by an earlier call, but its checkpoints are not here for fine-tuning: pretraining again"
      rm -rf "$dir"
      return 0
    fi
  done
}
IFS=, read -r -a todo <<<"$METHODS"
for m in "${todo[@]}"; do refresh_pretraining "$m"; done
say "Table 2 at mini scale: $METHODS, $steps steps each, seeds $SEEDS, SQuAD $EPOCHS epochs"
: >>"$OUT/table2.log"
if [[ $CALL_MIN != 0 ]]; then  # method by method, stopping where the call's time would run out
  call_s=$("$PY" -c "import sys; print(int(float(sys.argv[1]) * 60))" "$CALL_MIN") || fail "--call-minutes: not a number: $CALL_MIN"
  for m in "${todo[@]}"; do
    need=$(left_s "$m") || fail "reading the plan's estimate for $m ($OUT/plan.json)"
    spent=$(($(date +%s) - T0))
    if ((need > 0 && spent + need > call_s)); then
      ((need <= call_s)) || fail "$m needs ~${need} s, more than a whole call of $call_s s:" \
        "shrink the stage (--epochs 1, fewer --seeds) or give longer calls"
      say "stopping before $m: it needs ~${need} s, this call has $((call_s - spent)) s of its $call_s left;" \
          "run the same command again to continue"
      exit 3
    fi
    table2 "$m"
  done
fi
table2 "$METHODS"  # every method: what is left, then the tables

# ---- 4. results -----------------------------------------------------------------------------
mkdir -p "$REPORT"
tables=$OUT/reproduce/tables/table2
cp "$tables"/tables.{md,csv,json} "$tables"/cost.{md,csv,json} "$OUT/plan.json" "$REPORT/"
IFS=, read -r -a method_list <<<"$METHODS"
runs=()
for m in "${method_list[@]}"; do runs+=("$OUT/reproduce/pretrain/$m"); done
# The plot is a convenience: a Python without matplotlib must not cost the report (nor may an
# earlier run's plot stand in for this one's).
rm -f "$REPORT/losses.png"
"$PY" scripts/plot_losses.py "${runs[@]}" -o "$REPORT/losses.png" >/dev/null ||
  say "loss plot skipped (scripts/plot_losses.py failed: matplotlib?); the report follows"
"$PY" bench/table2_report.py --device-name "$DEVNAME" --plan "$OUT/plan.json" --tables "$REPORT/tables.md" \
  --cost "$REPORT/cost.md" --manifest "$DATA/manifest.json" --runs "${runs[@]}" --elapsed-s $(($(date +%s) - T0)) --out "$REPORT/README.md"
say "done in $(($(date +%s) - T0)) s; results in $REPORT"
