#!/usr/bin/env bash
# Sanitizer + fuzz run of the readers of untrusted files: YAML config, corpus text, GLUE TSV,
# SQuAD JSON, token shards, safetensors (tests/fuzz/fuzz_readers.cpp). Builds them with
# -fsanitize=address,undefined in build-asan (CMake option RPE_SANITIZE=ON; only the fuzz
# targets and the sources they need, not the whole project), seeds each from the repository's
# sample files, fuzzes each for SECONDS and prints execs and findings per reader.
# clang gives libFuzzer (coverage-guided); without clang a plain mutation driver built with
# the default compiler runs instead. Checkpoints are LibTorch archives read by LibTorch itself;
# they are covered by tests/cli/bad_input_battery.py (truncation, bit flips) on the normal build.
# Usage: scripts/fuzz_readers.sh [SECONDS per reader, default 30] [READER ...]
# Findings (inputs that crash, trip a sanitizer, or throw anything but a UserError) are kept
# in build-asan/fuzz/findings/; exit status 1 when there is any.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
[[ $# -gt 0 ]] && shift
readers=("$@")
[[ ${#readers[@]} -eq 0 ]] && readers=(yaml corpus glue squad shard safetensors)
build=${RPE_ASAN_BUILD_DIR:-build-asan}
work=$build/fuzz
cxx=()
if command -v clang++ >/dev/null; then cxx=(-DCMAKE_CXX_COMPILER=clang++); fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [[ ! -f $build/CMakeCache.txt ]]; then
  cmake -S . -B "$build" "${generator[@]}" "${cxx[@]}" -DCMAKE_BUILD_TYPE=Release -DRPE_SANITIZE=ON \
    -DRPE_BUILD_TESTS=OFF -DRPE_USE_PCH=OFF >/dev/null  # a few targets only: a .gch would not pay off
fi
targets=()
for r in "${readers[@]}"; do targets+=("fuzz_$r"); done
cmake --build "$build" --parallel "$(nproc)" --target "${targets[@]}"

# Seeds: valid inputs of each kind, small (libFuzzer's -max_len follows the largest seed).
seed() { mkdir -p "$work/seeds/$1"; }
make_seeds() {
  local r=$1 dir=$work/seeds/$1
  rm -rf "$dir"; seed "$r"
  case $r in
    yaml)
      for f in configs/model/*.yaml configs/attention/*.yaml configs/train/*.yaml; do
        cp "$f" "$dir/$(basename "$(dirname "$f")")_$(basename "$f")"
      done
      printf 'model:\n  hidden: 64\n  layers: 2\n  heads: 4\n  attention:\n    method: m4\n    max_relative: 8\ndata:\n  train_files: [a.txt]\ntrain:\n  lr: 1.0e-4\n  adam_beta1: 0.9\nrun:\n  name: x\n' >"$dir/full.yaml" ;;
    corpus)
      head -n 40 data/sample/corpus.txt >"$dir/corpus.txt"
      printf 'caf\xc3\xa9 na\xc3\xafve \xe2\x82\xac 5\n\nsecond document\n' >"$dir/utf8.txt" ;;
    glue)
      local i=0
      for t in CoLA SST-2 MRPC STS-B QQP MNLI QNLI RTE WNLI; do  # first byte: the task, as in the target
        { printf "\\x$(printf %02x $i)"; head -n 8 "data/sample/glue/$t/train.tsv"; } >"$dir/$t.tsv"
        i=$((i + 1))
      done ;;
    squad)
      python3 - "$dir/squad.json" <<'PY'
import json, sys
d = json.load(open("data/sample/squad/dev-v1.1.json"))
d["data"] = d["data"][:1]
d["data"][0]["paragraphs"] = d["data"][0]["paragraphs"][:1]
json.dump(d, open(sys.argv[1], "w"), ensure_ascii=False)
PY
      ;;
    shard | safetensors)
      RPE_FUZZ_MAKE_SEED="$dir" "$build/fuzz_$r" ;;
  esac
}

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1:detect_odr_violation=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
mkdir -p "$work/findings"
summary=()
found=0
for r in "${readers[@]}"; do
  make_seeds "$r"
  mkdir -p "$work/corpus/$r"
  log=$work/$r.log
  bin=$build/fuzz_$r
  set +e
  # libFuzzer's help names it; the standalone driver's output does not (-runs=0: it only runs
  # the empty input). Captured whole, not piped into `grep -q`: grep quits at the first match, the
  # binary's next write to the closed pipe dies of SIGPIPE, and under pipefail the probe then
  # failed at random and libFuzzer binaries ran through the standalone branch.
  help=$("$bin" -help=1 -runs=0 2>&1)
  if [[ $help == *libFuzzer* ]]; then
    "$bin" -max_total_time="$secs" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
      -artifact_prefix="$work/findings/$r-" "$work/corpus/$r" "$work/seeds/$r" >"$log" 2>&1
  else  # standalone driver: about 200 inputs a second on a loaded machine
    timeout $((secs + 60)) "$bin" -runs=$((secs * 200)) "$work/seeds/$r" >"$log" 2>&1
  fi
  rc=$?
  set -e
  execs=$(grep -oE '(stat::number_of_executed_units: [0-9]+|Done [0-9]+ runs)' "$log" | grep -oE '[0-9]+' | tail -1)
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+' || true)
  n=$(find "$work/findings" -name "$r-*" | wc -l)
  [[ $rc -ne 0 && $n -eq 0 ]] && n=1  # a crash without an artifact (standalone driver)
  found=$((found + n))
  summary+=("$(printf '%-12s execs %-9s coverage %-6s findings %s' "$r" "${execs:-?}" "${cov:--}" "$n")")
  if [[ $n -gt 0 ]]; then echo "== $r: finding(s), see $log"; grep -E 'ERROR|SUMMARY|not a UserError|runtime error' "$log" | head -5; fi
done
echo "fuzz_readers: ${secs}s per reader, sanitizers address+undefined"
printf '%s\n' "${summary[@]}"
[[ $found -eq 0 ]]
