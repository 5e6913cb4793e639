#!/usr/bin/env bash
# ctest pack_build: a build carried to another machine (scripts/pack_build.sh, docs/gpu.md).
# Packs this build, runs the GPU check's test step from the packed copy (scripts/gpu_env.sh
# finds LibTorch through the Python's torch and the repository through RPE_SOURCE_DIR), and
# checks that a failed check lets the next steps run, and the refusals: a missing program, a build older than the checkout or an existing
# destination (exit 2), a carried build
# whose torch version is not the Python's, and a build step asked of a carried build (exit 1).
# Usage: test_pack_build.sh REPO BUILD_DIR PYTHON
set -euo pipefail
root=$(cd "$1" && pwd) build=$(cd "$2" && pwd) py=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$root"
fail() { echo "FAIL: $*" >&2; exit 1; }
expect() {  # expect CODE TEXT COMMAND...: exit status CODE and TEXT in the last line of stderr
  local code=$1 text=$2; shift 2
  set +e; "$@" >"$work/out" 2>"$work/err"; local got=$?; set -e
  ((got == code)) || fail "$* exited $got, not $code: $(cat "$work/err")"
  tail -1 "$work/err" | grep -qF -- "$text" || fail "$*: no '$text' in: $(cat "$work/err")"
}

expect 2 "$work/none/rpe-train not found" scripts/pack_build.sh "$work/x" --build-dir "$work/none" --python "$py"
# A build older than the checkout (its rpe-train reports another revision) is not packed.
mkdir "$work/stale"
grep '^Torch_DIR:' "$build/CMakeCache.txt" >"$work/stale/CMakeCache.txt"
for p in rpe-train rpe_tests rpe-bench-model rpe-bench-optim; do
  printf '#!/bin/sh\necho "rpe-train 0.1.0 (0000000)"\n' >"$work/stale/$p" && chmod +x "$work/stale/$p"
done
expect 2 "$work/stale/rpe-train is of revision 0000000, the checkout of $(git describe --always --dirty)" \
  scripts/pack_build.sh "$work/x" --build-dir "$work/stale" --python "$py"
# A build configured with -DTorch_DIR= naming another LibTorch (an untyped cache entry) is
# neither packed nor run with this Python's torch (whose lib/ would be loaded instead).
mkdir "$work/other" "$work/elsewhere"
echo "Torch_DIR:UNINITIALIZED=$work/elsewhere" >"$work/other/CMakeCache.txt"
cp "$work/stale/rpe-train" "$work/stale/rpe_tests" "$work/stale/rpe-bench-model" "$work/stale/rpe-bench-optim" "$work/other/"
expect 2 "$work/other was built against the LibTorch in $work/elsewhere, not" \
  scripts/pack_build.sh "$work/x" --build-dir "$work/other" --python "$py"
expect 1 "$work/other was built against the LibTorch in $work/elsewhere, not $py's torch" \
  scripts/gpu_check.sh --cpu-smoke --build-dir "$work/other" --python "$py" --only tests --out "$work/other_run"
expect 2 "--programs: 'rpe-bench' is not one of" scripts/pack_build.sh "$work/x" --build-dir "$build" --python "$py" --programs rpe-train,rpe-bench
scripts/pack_build.sh "$work/stage2" --build-dir "$build" --python "$py" --programs rpe-train,rpe-bench-model
[[ $(ls "$work/stage2") == $'built_with.txt\nrpe-bench-model\nrpe-train' ]] || fail "--programs packed: $(ls "$work/stage2")"
scripts/pack_build.sh "$work/carried" --build-dir "$build" --python "$py"
expect 2 "$work/carried exists" scripts/pack_build.sh "$work/carried" --build-dir "$build" --python "$py"
for p in rpe-train rpe_tests rpe-bench-model rpe-bench-optim; do [[ -x $work/carried/$p ]] || fail "no $p packed"; done
version=$("$py" -c "import torch; print(torch.__version__)")
grep -qx "torch $version" "$work/carried/built_with.txt" || fail "built_with.txt: $(cat "$work/carried/built_with.txt")"
grep -qx "revision $(git describe --always --dirty)" "$work/carried/built_with.txt" || fail "built_with.txt: no revision"

# The carried programs run the check's test step (the CUDA cases skip on the CPU).
scripts/gpu_check.sh --cpu-smoke --build-dir "$work/carried" --python "$py" --only tests --out "$work/run" >"$work/log" 2>&1 \
  || { cat "$work/log"; fail "gpu_check.sh from the carried build"; }
grep -q "using the build carried in $work/carried" "$work/log" || fail "the carried build was not reported: $(cat "$work/log")"
grep -q "^\[  PASSED  \]" "$work/run/tests.log" || fail "no passed tests in $work/run/tests.log"

# The carried test program runs the carried rpe-train, not the one at the path it was built at
# (the GPU machine has no such path).
bash -c 'say() { :; }; fail() { echo "$*" >&2; exit 1; }; source scripts/gpu_env.sh
  gpu_env "$1" none "$2" && "$2/rpe_tests" --gtest_filter=TestPaths.*' _ "$py" "$work/carried" >"$work/paths.log" 2>&1 \
  || fail "the carried rpe_tests does not run the carried rpe-train: $(cat "$work/paths.log")"
grep -qF "[  PASSED  ] 1 test." "$work/paths.log" || fail "TestPaths.* ran no test: $(cat "$work/paths.log")"

# The CUDA runtime the carried programs load is the torch wheel's (nvidia/*/lib), found through
# gpu_env's LD_LIBRARY_PATH, not the toolkit registered here (a GPU image need not have one).
cudart=$(bash -c 'say() { :; }; fail() { echo "$*" >&2; exit 1; }; source scripts/gpu_env.sh
  gpu_env "$1" none "$2" && ldd "$2/rpe-train"' _ "$py" "$work/carried" | awk '/libcudart/ {print $3}')
wheel_nvidia=$("$py" -c "import os, torch; print(os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), 'nvidia'))")
if [[ -d $wheel_nvidia ]] && ls "$wheel_nvidia"/*/lib/libcudart.so* >/dev/null 2>&1; then
  [[ $cudart == "$wheel_nvidia"/* ]] || fail "the carried rpe-train loads libcudart from '$cudart', not from $wheel_nvidia"
fi

# A failed check does not stop the steps after it (a GPU lent by the minute keeps its
# benchmark): a test program that fails, then the benchmark still runs and writes its report,
# and the command exits 1 listing the failure.
cp -a "$work/carried" "$work/failing"
printf '#!/bin/sh\necho "[  FAILED  ] Fake.Test"\nexit 1\n' >"$work/failing/rpe_tests"
expect 1 "[gpu_check]   tests ($work/fail_run/tests_graphs.log)" \
  scripts/gpu_check.sh --cpu-smoke --build-dir "$work/failing" --python "$py" --only tests,bench --out "$work/fail_run"
grep -qxF "[gpu_check]   tests ($work/fail_run/tests.log)" "$work/err" || fail "the first test process's failure is not listed: $(cat "$work/err")"
grep -q "^### rpe m4" "$work/fail_run/gpu_cpu_smoke.md" || fail "no benchmark report after a failed test step: $(cat "$work/err")"
grep -q "5 check(s) failed" "$work/err" || fail "the failures were not listed: $(cat "$work/err")"
# Each kernel's tests ran in a process of their own; the kernels whose tests failed are turned off
# for the rest of the call (the benchmark's processes inherit the switch).
grep -qxF "[gpu_check]   tests of the add_norm kernel ($work/fail_run/tests_add_norm.log); the rest of this call runs without it" \
  "$work/err" || fail "the add_norm kernel's failed tests are not listed: $(cat "$work/err")"
grep -qF "RPE_TRAIN_DISABLE_CUDA_KERNELS=relative_layout,add_norm,m3 from here on" "$work/out" "$work/err" \
  || fail "the failed kernels were not turned off: $(cat "$work/out" "$work/err")"

# A benchmark program that fails costs its own rows only: Hugging Face's baseline (skipped
# here without transformers, or run), the optimizer step and the report still come.
cp -a "$work/carried" "$work/failing_bench"
printf '#!/bin/sh
echo "CUDA error: an illegal memory access was encountered" >&2
exit 1
' >"$work/failing_bench/rpe-bench-model"
expect 1 "has no row of m4 clipped at k = 16" \
  scripts/gpu_check.sh --cpu-smoke --build-dir "$work/failing_bench" --python "$py" --only bench --out "$work/fail_bench"
grep -qF "has no profile of m4's step" "$work/err" || fail "the missing profile is not listed: $(cat "$work/err")"
grep -qF "[gpu_check]   rpe-bench-model (" "$work/err" || fail "the failed benchmark stage is not listed: $(cat "$work/err")"
[[ -s $work/fail_bench/optim.jsonl ]] || fail "the optimizer step did not run after a failed benchmark stage: $(cat "$work/err")"

# Another torch than the one it was built against: refused before anything runs.
sed -i "s/^torch .*/torch 0.0.0/" "$work/carried/built_with.txt"
expect 1 "built against torch 0.0.0, but $py has torch $version" \
  scripts/gpu_check.sh --cpu-smoke --build-dir "$work/carried" --python "$py" --only tests --out "$work/run2"
expect 1 "built against torch 0.0.0" \
  scripts/gpu_table2.sh --cpu-smoke --build-dir "$work/carried" --python "$py" --data "$work/none" --out "$work/run3"
echo "pack_build: the carried build runs, and a mismatched one is refused"
