#!/usr/bin/env bash
# The GPU acceptance command (issue 14; docs/gpu.md). On a GPU machine that has only Python's
# torch (in .venv), nvcc, cmake, ninja and a C++ compiler -- no apt, no network:
#   1. builds rpe-train against .venv's torch and the folder scripts/pack_deps.sh packed
#      (--deps DIR, default deps/; the system's libraries when there is none);
#   2. runs the CUDA tests (fused vs plain attention, whole model vs fp64 CPU with bias
#      gradients, per method), the bf16 tests and the host-synchronisation checks (HostSync.*:
#      no op in a training step makes the host wait, on the device itself);
#   3. trains every method for --steps bf16 steps at BERT-base size, and m4 in fp16 with its
#      loss scale: the loss must fall and no step may be non-finite (fp16: a few overflows while
#      the scale settles) (a rerun keeps the runs an earlier call finished);
#   4. measures tokens/s, peak memory and MFU at L = 128 and 512 for every method beside
#      Hugging Face BertForMaskedLM (transformers 4.x: absolute SDPA, relative_key,
#      relative_key_query; --wheels: carried by scripts/pack_wheels.sh) in the same run
#      -> bench/results/gpu_<device>.md. MFU needs the GPU's peak: a model bench/gpu_report.py
#      does not list (or a MIG slice) needs --peak-tflops X, checked before the benchmark runs.
#   5. (--table2) the second stage, scripts/gpu_table2.sh: Table 2 at mini scale on real data
#      (--data: the folder scripts/pack_data.sh wrote), sized to --minutes.
# --only build,tests,train,bench runs those steps alone (to split the check over several calls of
# a machine that limits one command's time: each through scripts/gpu_call.sh, docs/gpu.md).
# --build-dir may name a build carried from another machine (scripts/pack_build.sh, same torch
# version): then leave out the build step.
# --cpu-smoke: the same four steps at tiny sizes on the CPU against an existing build (no
# build step, results under --out), so the command cannot rot: ctest runs it (gpu_check_cpu_smoke).
# Exit 0 = every check passed. A failed check prints why and the steps after it still run
# (a failed test does not cost the benchmark), then exit 1 listing every failure; a step that
# leaves nothing to run after it (no build, no CUDA device) exits 1 at once.
set -euo pipefail
cd "$(dirname "$0")/.."
SMOKE=0 BUILD=build-gpu DEPS=deps OUT="" STEPS=300 PY=.venv/bin/python ONLY=build,tests,train,bench
TABLE2=0 DATA=gpu-data MINUTES=25 WHEELS="" PEAK=()
while (($#)); do
  case $1 in
    --cpu-smoke) SMOKE=1 ;;
    --build-dir) BUILD=$2; shift ;;
    --deps) DEPS=$2; shift ;;
    --out) OUT=$2; shift ;;
    --steps) STEPS=$2; shift ;;
    --python) PY=$2; shift ;;
    --only) ONLY=$2; shift ;;
    --table2) TABLE2=1 ;;
    --data) DATA=$2; shift ;;
    --minutes) MINUTES=$2; shift ;;
    --wheels) WHEELS=$2; shift ;;
    --peak-tflops) PEAK=(--peak-tflops "$2"); shift ;;
    *) echo "usage: $0 [--cpu-smoke] [--build-dir DIR] [--deps DIR] [--out DIR] [--steps N] [--python PY]" \
            "[--only build,tests,train,bench] [--wheels DIR] [--peak-tflops X]" \
            "[--table2 [--data DIR] [--minutes M]]" >&2; exit 2 ;;
  esac
  shift
done
say() { echo "[gpu_check] $*"; }
fail() { echo "[gpu_check] FAILED: $*" >&2; exit 1; }
# A check that failed while the steps after it can still run: they do (a GPU lent by the minute
# should not lose its benchmark to a failed test: the H200 run did), and the command exits 1 at
# its end, listing every one. fail() is for what leaves nothing to run after it.
FAILED=()
failed() { echo "[gpu_check] FAILED: $*" >&2; FAILED+=("$*"); }
command -v "$PY" >/dev/null || fail "no Python at $PY (the one with torch; --python)"
PY=$(command -v "$PY")
for s in ${ONLY//,/ }; do [[ $s =~ ^(build|tests|train|bench)$ ]] || { echo "$0: --only: unknown step '$s'" >&2; exit 2; }; done
step() { [[ ",$ONLY," == *",$1,"* ]]; }

# ---- 1. build -------------------------------------------------------------------------
source scripts/gpu_env.sh
gpu_env "$PY" "$DEPS" "$BUILD"  # carried libraries (pack_deps.sh) and build (pack_build.sh), torch's lib
if ((SMOKE)); then
  DEVICE=cpu
  for b in rpe-train rpe_tests rpe-bench-model rpe-bench-optim; do [[ -x $BUILD/$b ]] || fail "no $BUILD/$b (build first)"; done
else
  DEVICE=cuda
  "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" || fail "torch sees no CUDA device"
  if step build; then
    [[ ! -f $BUILD/built_with.txt ]] || fail "$BUILD holds a carried build (scripts/pack_build.sh): leave out the build step"
    say "building into $BUILD"
    gpu_configure "$PY" "$BUILD" >"$BUILD.configure.log" 2>&1 \
      || { tail -20 "$BUILD.configure.log"; fail "configure (log: $BUILD.configure.log)"; }
    cmake --build "$BUILD" --target rpe-train rpe_tests rpe-bench-model rpe-bench-optim >"$BUILD.build.log" 2>&1 \
      || { tail -30 "$BUILD.build.log"; fail "build (log: $BUILD.build.log)"; }
  fi
  [[ -x $BUILD/rpe-train ]] || fail "no $BUILD/rpe-train (run the build step first: --only build)"
fi
gpu_same_torch "$PY" "$BUILD"
"$BUILD/rpe-train" --version
((SMOKE)) || "$BUILD/rpe-train" --version | grep -qx "m3 CUDA kernel: built" \
  || say "warning: this build has no CUDA kernels (nvcc was not found when it was configured): m3 runs its band kernel, relative scores their skew path, add & norm unfused"
source scripts/device_name.sh
device_name "$PY" "$( ((SMOKE)) && echo cpu || echo cuda)"  # DEVNAME, SLUG
OUT=${OUT:-$( ((SMOKE)) && mktemp -d || echo "bench/results/gpu_run_$SLUG")}
mkdir -p "$OUT"

# ---- 2. tests ---------------------------------------------------------------------------
run_tests() {
  if ((SMOKE)); then
    FILTER='*Cuda*:AttentionDispatch.*:HostSync.*'  # the CUDA cases skip on CPU; the dispatch checks run
  else
    FILTER='*Cuda*:AttentionDispatch.*:FusedAttention.*:Bf16Autocast.*:Fp16Autocast.*:LossScaler.*:HostSync.*'
  fi
  # The hand-written kernels' own tests first, each kernel in a process of its own: a device
  # fault (an illegal address) ends a process, so one that fails here is turned off for the rest
  # of this call (RPE_TRAIN_DISABLE_CUDA_KERNELS, read by every later rpe_tests, rpe-train and
  # benchmark), which then measures its fallback instead of losing every later stage to it.
  local pair id off=()
  for pair in "relative_layout:RelativeScores.Cuda*" "add_norm:AddNorm.Cuda*" "m3:M3.Cuda*"; do
    id=${pair%%:*}
    say "tests: ${pair#*:} (the $id kernel)"
    "$BUILD/rpe_tests" --gtest_filter="${pair#*:}" >"$OUT/tests_$id.log" 2>&1 || {
      tail -20 "$OUT/tests_$id.log"
      failed "tests of the $id kernel ($OUT/tests_$id.log); the rest of this call runs without it"
      off+=("$id")
    }
  done
  if ((${#off[@]})); then
    RPE_TRAIN_DISABLE_CUDA_KERNELS=$(IFS=,; echo "${off[*]}")
    export RPE_TRAIN_DISABLE_CUDA_KERNELS
    say "RPE_TRAIN_DISABLE_CUDA_KERNELS=$RPE_TRAIN_DISABLE_CUDA_KERNELS from here on"
  fi
  FILTER+="-RelativeScores.Cuda*:AddNorm.Cuda*:M3.Cuda*"
  say "tests: $FILTER"
  # CudaGraphs.* in a process of its own, after the others: a failed capture can leave PyTorch's
  # CUDA generator in capture mode, which would fail every later test that draws random numbers.
  "$BUILD/rpe_tests" --gtest_filter="$FILTER:CudaGraphs.*" >"$OUT/tests.log" 2>&1 \
    || { tail -40 "$OUT/tests.log"; failed "tests ($OUT/tests.log)"; }
  grep -E "^\[  (PASSED|SKIPPED) " "$OUT/tests.log" || true
  "$BUILD/rpe_tests" --gtest_filter="CudaGraphs.*" >"$OUT/tests_graphs.log" 2>&1 \
    || { tail -40 "$OUT/tests_graphs.log"; failed "tests ($OUT/tests_graphs.log)"; }
  grep -E "^\[  (PASSED|SKIPPED) " "$OUT/tests_graphs.log" || true
}

# ---- 3. bf16 training of every method, fp16 of one --------------------------------------
run_training() {
  METHODS=$("$BUILD/rpe-train" methods --names)
  if ((SMOKE)); then
    STEPS=12
    size=(--set model.hidden=32 --set model.layers=2 --set model.heads=2 --set model.ffn=64 --set model.max_position=64
          --set data.max_seq_len=64 --set train.batch_size=8 --set data.tokenizer_vocab_size=200 --set train.threads=1)
  else
    size=(--set data.max_seq_len=128 --set train.batch_size=64 --set data.tokenizer_vocab_size=8000)
  fi
  corpus=$OUT/corpus.txt
  head -c 2000000 data/sample/corpus.txt >"$corpus"
  # The base_* presets (BERT-base; the smoke shrinks them) on the sample corpus, read as text.
  common=(--set "data.train_files=[$corpus]" --set 'data.shards=""' --set data.tokenizer=sentencepiece
          --set 'data.tokenizer_model=""' --set data.whole_word=false --set data.lowercase=false
          --set "train.device=$DEVICE" --set train.max_steps="$STEPS"
          --set train.log_every=$((STEPS / 4)) --set train.eval_every=0 --set train.eval_batches=2
          --set train.warmup_steps=$((STEPS / 10)) --set train.lr=3e-4 --set train.save_every=0)
  local m tok=()
  for m in $(grep -vx m3 <<<"$METHODS"); do
    train_one "$m" bf16
    # one tokenizer for all methods: trained by the first run, reused after
    ((${#tok[@]})) || tok=(--set "data.tokenizer_model=$OUT/train_$m/tokenizer.model")
  done
  train_one m4 fp16  # fp16 with its dynamic loss scale (V100-class GPUs): the paper's favourite
  # train.cuda_graphs: absolute again, each micro-batch replayed as one CUDA graph (tokens/s
  # beside the eager run's above; CudaGraphs.* in the tests compares the two step by step)
  if ! ((SMOKE)) && grep -qx absolute <<<"$METHODS"; then train_one absolute bf16 graphs; fi
  # m3 last: the slowest on a GPU so far (4 m 48 s of 300 steps on the H200, its band kernel
  # then one diagonal a group), so that a call cut at its limit has trained the others
  if grep -qx m3 <<<"$METHODS"; then train_one m3 bf16; fi
}

# train_one METHOD PRECISION [graphs]: one run (kept when an earlier call finished it) and its
# checks: the loss falls and no step diverged; fp16 may skip a few steps while its loss scale
# settles. "graphs": with train.cuda_graphs.
train_one() {
  local m=$1 precision=$2 run=$OUT/train_$1 cfg=base_$1.yaml  # composed from configs/pretrain/base.yaml + the method
  local graphs=()
  [[ $precision == bf16 ]] || run=${run}_$precision
  [[ ${3:-} != graphs ]] || { run=${run}_graphs; graphs=(--set train.cuda_graphs=true); }
  if "$PY" -c "import json, sys; sys.exit(json.load(open(sys.argv[1]))['steps'] != int(sys.argv[2]))" \
       "$run/summary.json" "$STEPS" 2>/dev/null; then
    say "train $m: finished by an earlier call (kept; checked again)"  # a rerun after a time limit
  else
    say "train $m: $STEPS $precision steps"
    "$BUILD/rpe-train" pretrain --config "$cfg" --run-dir "$run" --overwrite "${size[@]}" "${common[@]}" \
      --set "train.precision=$precision" "${tok[@]}" "${graphs[@]}" >"$run.log" 2>&1 ||
      { tail -20 "$run.log"; failed "training $m${3:+ ($3)}"; return 0; }
  fi
  "$PY" - "$run" "$m $precision${3:+ $3}" <<'PY' || failed "training $m ($precision${3:+ $3}): see above"
import json, math, sys
run, name = sys.argv[1], sys.argv[2]
s = json.load(open(run + "/summary.json"))
events = [json.loads(l).get("event") for l in open(run + "/metrics.jsonl")]
first, final, skipped = s["first_loss"], s["final_loss"], s.get("nonfinite_skipped", 0)
overflows = events.count("overflow_skip")
if first is None or final is None:  # summary.json's null: no logged window had an update
    sys.exit(f"{name}: every step was skipped ({skipped} non-finite or overflowing), none updated the weights")
print(f"[gpu_check]   {name}: loss {first:.3f} -> {final:.3f}, non-finite steps {skipped - overflows}, "
      f"fp16 overflows {overflows}, {s['tokens_seen'] / max(s['train_s'], 1e-9):,.0f} tokens/s")
if not (math.isfinite(first) and math.isfinite(final)) or skipped != overflows:
    sys.exit("non-finite loss or skipped steps")
if overflows > 20:
    sys.exit("more than 20 fp16 overflows: the loss scale did not settle")
if not final < first:
    sys.exit("the loss did not fall")
PY
}

# ---- 4. benchmark beside Hugging Face ------------------------------------------------------
run_bench() {
  local size=() bench=() optim=() profile=() graphs=()
  if ((SMOKE)); then
    size=(--hidden 32 --layers 2 --heads 2 --ffn 64 --vocab 200 --steps 2 --warmup 1)
    bench=(--device cpu --lengths 32 --batch-tokens 256 "${size[@]}")
    optim=(--device cpu "${size[@]}")
    profile=(--profile-steps 1)
    REPORT=$OUT/gpu_cpu_smoke.md
  else
    # --max-seconds: a slow case (m3 took 5 s a step on the H200) times 3 steps, not 20
    bench=(--device cuda --lengths 128,512 --batch-tokens 16384 --steps 20 --warmup 3 --max-seconds 8)
    optim=(--device cuda --steps 20 --warmup 3)  # BERT-base
    profile=(--profile-steps 3)
    # absolute and m4 once more as one CUDA graph a step (the eager step's launch overhead), in a
    # call of their own after everything else: a crash in a capture costs no other row
    graphs=(--methods absolute,m4 --graph-methods absolute,m4 --graphs-only)
    REPORT=bench/results/gpu_$SLUG.md
  fi
  # An unknown peak would fail the report after minutes of benchmark: refuse it first.
  "$PY" bench/gpu_report.py --device-name "$DEVNAME" "${PEAK[@]}" --check-peak || fail "MFU: see the line above"
  # Hugging Face ready before any GPU minute is spent: the carried wheels installed and imported
  # (beside whatever else this Python has), or, with no --wheels, the baseline skipped if absent.
  local hf_env=() hf=1
  if [[ -n $WHEELS ]]; then  # transformers 4.x carried as wheels (scripts/pack_wheels.sh), for hf_bench.py only
    "$PY" -m pip install -q --no-index --no-deps --no-compile --disable-pip-version-check --target "$OUT/hf-site" \
      "$WHEELS"/*.whl || fail "installing the wheels in $WHEELS"
    hf_env=(env PYTHONPATH="$OUT/hf-site${PYTHONPATH:+:$PYTHONPATH}")
  fi
  local probe='import transformers, sys; from transformers import BertForMaskedLM, BertConfig
BertForMaskedLM(BertConfig(vocab_size=8, hidden_size=8, num_hidden_layers=1, num_attention_heads=1, intermediate_size=8))
sys.exit(0 if transformers.__version__.startswith("4.") else "transformers " + transformers.__version__ + " is not 4.x")'
  if ! "${hf_env[@]}" "$PY" -c "$probe" >"$OUT/hf_probe.log" 2>&1; then
    [[ -n $WHEELS ]] && { tail -3 "$OUT/hf_probe.log"; fail "the carried transformers cannot run BertForMaskedLM (above)"; }
    say "Hugging Face baseline skipped: $(tail -1 "$OUT/hf_probe.log")"
    hf=0
  fi
  # What the targets need first (our peers of Hugging Face's types, absolute and m4 profiled,
  # then the baseline), the other methods and the optimizer step after: a call cut at its
  # limit keeps the rows that matter most (the JSON lines are written as each case ends). A
  # stage that fails (a kernel never run on a GPU before brings its process down) is listed at
  # the end and the stages after it still run: none of them needs another's rows.
  local peers others note  # peers: our methods that have a Hugging Face peer (gpu_report.py's HF_PEER)
  peers=$("$PY" -c 'import sys; sys.path.insert(0, "bench"); from gpu_report import HF_PEER; print(",".join(HF_PEER))')
  note=$(((SMOKE)) && echo 'CPU smoke run at tiny size: the numbers mean nothing.' || echo "$("$BUILD/rpe-train" --version | head -1), measured $(date -u +%F)")
  : >"$OUT/hf.jsonl"
  : >"$OUT/optim.jsonl"
  report() {  # after each stage, so that a call cut at its limit still brings a report back
    "$PY" bench/gpu_report.py --device-name "$DEVNAME" "${PEAK[@]}" --out "$REPORT" "$OUT/rpe.jsonl" "$OUT/hf.jsonl" \
      "$OUT/optim.jsonl" --note "$note" >/dev/null || failed "bench/gpu_report.py after the stage above"
  }
  others=$("$BUILD/rpe-train" methods --names | grep -vxF -f <(tr , '\n' <<<"$peers") | paste -sd, -)
  say "benchmark: rpe-bench-model ($peers; profiled: rpe-bench-model's --profile-methods)"
  "$BUILD/rpe-bench-model" "${bench[@]}" --methods "$peers" "${profile[@]}" >"$OUT/rpe.jsonl" 2>"$OUT/rpe_bench.log" \
    || { tail "$OUT/rpe_bench.log"; failed "rpe-bench-model ($peers)"; }
  report
  local code=0
  if ((hf)); then
    say "benchmark: Hugging Face (bench/hf_bench.py)"
    "${hf_env[@]}" "$PY" bench/hf_bench.py "${bench[@]}" >"$OUT/hf.jsonl" 2>"$OUT/hf_bench.log" || code=$?
    report  # whatever became of the baseline (its rows are the ones that finished)
  fi
  more() {  # more rows of rpe-bench-model: $1 says which, the rest are its arguments
    say "benchmark: rpe-bench-model ($1)"
    shift
    "$BUILD/rpe-bench-model" "${bench[@]}" "$@" >>"$OUT/rpe.jsonl" 2>>"$OUT/rpe_bench.log" \
      || { tail "$OUT/rpe_bench.log"; failed "rpe-bench-model $*"; }
    report
  }
  more "the other methods" --methods "$others"
  # m4 once more with its relative scores laid out by the skew path (4 query blocks, their
  # copies and a transposed add) instead of the layout kernels: what the kernels buy
  more "m4, relative scores by the skew path" --methods m4 --no-relative-kernel
  # absolute once more with its post-LN add & norm unfused (separate ATen kernels): what the
  # fused kernel (src/model/add_norm_cuda.cu) buys, measured beside it
  more "absolute, add & norm unfused" --methods absolute --unfused-add-norm
  # m4 and absolute with their attention cores recomputed in backward, and m4 with whole layers
  # (train.activation_checkpointing): the memory each saves against the time it costs, beside
  # the default rows and Hugging Face's
  more "absolute and m4, attention recomputed" --methods absolute,m4 --activation-checkpointing attention
  more "m4, layers recomputed" --methods m4 --activation-checkpointing layers
  # m4 with only the [B, H, L, L] bias the fused kernel keeps rebuilt in backward (two thin GEMMs
  # and the layout a layer): most of what recomputing the attention core saves, for less time
  more "m4, bias rebuilt" --methods m4 --activation-checkpointing bias
  # m4 clipped at k = 16 (Table 4's models): clipped ends longer than the layout kernels take keep
  # the skew path and its gather whose gradient is summed in fp32 a chunk at a time, beside k = 511
  more "m4 clipped at k = 16" --methods m4 --max-relative 16
  say "benchmark: one optimizer step (rpe-bench-optim)"
  "$BUILD/rpe-bench-optim" "${optim[@]}" >"$OUT/optim.jsonl" 2>"$OUT/optim_bench.log" || { tail "$OUT/optim_bench.log"; failed "rpe-bench-optim"; }
  report
  if ((${#graphs[@]})); then
    say "benchmark: rpe-bench-model, absolute and m4 as CUDA graphs"
    "$BUILD/rpe-bench-model" "${bench[@]}" "${graphs[@]}" >>"$OUT/rpe.jsonl" 2>>"$OUT/rpe_bench.log" \
      || { tail "$OUT/rpe_bench.log"; failed "rpe-bench-model --graph-methods"; }
    report
  fi
  grep -q "^### rpe m4" "$REPORT" || failed "$REPORT has no profile of m4's step"
  grep -q "^| rpe (clipped k = 16) | m4 |" "$REPORT" || failed "$REPORT has no row of m4 clipped at k = 16"
  say "report: $REPORT"
  ((code == 0)) || { tail "$OUT/hf_bench.log"; failed "hf_bench.py (exit $code; the report has the rows that finished)"; }
  local missed
  missed=$(grep -c '| FAIL |' "$REPORT" || true)
  ((missed == 0)) || say "targets missed: $missed (the report's Targets section; benchmarks, not checks)"
}

step tests && run_tests
step train && run_training
step bench && run_bench
if ((TABLE2)); then
  say "second stage: Table 2 at mini scale on real data (scripts/gpu_table2.sh)"
  table2=(--data "$DATA" --minutes "$MINUTES" --build-dir "$BUILD" --deps "$DEPS" --python "$PY")
  ((SMOKE)) && table2+=(--cpu-smoke --out "$OUT/table2")
  scripts/gpu_table2.sh "${table2[@]}" || failed "second stage (scripts/gpu_table2.sh)"
fi
if ((${#FAILED[@]})); then
  echo "[gpu_check] ${#FAILED[@]} check(s) failed${REPORT:+ (report: $REPORT)}:" >&2
  for f in "${FAILED[@]}"; do echo "[gpu_check]   $f" >&2; done
  exit 1
fi
say "all checks passed${REPORT:+; report: $REPORT}"
