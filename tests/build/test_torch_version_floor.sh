#!/usr/bin/env bash
# ctest torch_version_floor: CMake refuses a LibTorch older than the sources compile against
# (docs/layout.md, "LibTorch versions") at configure time, naming its version and the floor,
# instead of failing deep in the compilation. A stand-in Torch package reports 2.1.2; the
# configure must stop there (nothing is compiled).
# Usage: test_torch_version_floor.sh REPO
set -euo pipefail
root=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/torch"
cat >"$work/torch/TorchConfigVersion.cmake" <<'CMAKE'
set(PACKAGE_VERSION "2.1.2")
set(PACKAGE_VERSION_COMPATIBLE TRUE)
CMAKE
cat >"$work/torch/TorchConfig.cmake" <<'CMAKE'
set(TORCH_FOUND TRUE)
set(TORCH_LIBRARIES "")
set(TORCH_INCLUDE_DIRS "")
CMAKE
if cmake -S "$root" -B "$work/build" -DTorch_DIR="$work/torch" >"$work/log" 2>&1; then
  echo "FAIL: configured against LibTorch 2.1.2" >&2; exit 1
fi
expect="LibTorch 2.1.2 (Torch_DIR=$work/torch) is too old: rpe-train needs LibTorch 2.2 or newer"
if ! tr -s ' \n' ' ' <"$work/log" | grep -qF "$expect"; then
  echo "FAIL: no message '$expect' in:" >&2; cat "$work/log" >&2; exit 1
fi
echo "torch_version_floor: passed (2.1.2 refused at configure time)"
