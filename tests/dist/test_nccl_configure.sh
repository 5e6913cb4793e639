#!/usr/bin/env bash
# ctest nccl_configure: a CUDA LibTorch build finds NCCL or stops at configure time (issue 14).
# Configures scratch build folders (no compilation): NCCL_ROOT naming a folder without nccl.h
# must stop with the message saying how to point at it; NCCL_ROOT at the wheel's nvidia/nccl
# must configure with that header and report its version. Skips (77) with a CPU-only LibTorch.
# Usage: test_nccl_configure.sh REPO PYTHON
set -euo pipefail
root=$(cd "$1" && pwd) py=$2
cuda=$("$py" -c "import torch; print(torch.version.cuda or '')" 2>/dev/null) || { echo "no torch: skipped"; exit 77; }
[[ -n $cuda ]] || { echo "CPU-only LibTorch: NCCL is not looked for; skipped"; exit 77; }
torch_dir=$("$py" -c "import torch.utils; print(torch.utils.cmake_prefix_path)")/Torch
nccl=$("$py" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/nvidia/nccl
[[ -f $nccl/include/nccl.h ]] || { echo "no $nccl/include/nccl.h (nvidia-nccl wheel): skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
configure() { cmake -S "$root" -B "$work/$1" -DTorch_DIR="$torch_dir" -DRPE_BUILD_TESTS=OFF "${@:2}" >"$work/$1.log" 2>&1; }

if configure missing -DNCCL_ROOT="$work/no-nccl"; then fail "configured without nccl.h under NCCL_ROOT"; fi
grep -q "NCCL_ROOT=$work/no-nccl: no include/nccl.h there" "$work/missing.log" \
  || fail "no message naming NCCL_ROOT: $(grep -A3 'CMake Error' "$work/missing.log")"

configure wheel -DNCCL_ROOT="$nccl" || fail "configure with NCCL_ROOT=$nccl: $(tail -5 "$work/wheel.log")"
found=$(sed -n 's/^NCCL_INCLUDE_DIR:PATH=//p' "$work/wheel/CMakeCache.txt")
[[ $found -ef $nccl/include ]] || fail "NCCL_INCLUDE_DIR=$found, not $nccl/include"
version=$(sed -n 's/^#define NCCL_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' "$nccl/include/nccl.h" | paste -sd.)
grep -q -- "-- NCCL $version: " "$work/wheel.log" || fail "configure did not report NCCL $version"
echo "nccl_configure: passed (NCCL $version, CUDA $cuda LibTorch)"
