#!/usr/bin/env bash
# ctest torch_version_floor: CMake refuses, at configure time and naming the reason, a LibTorch
# the sources cannot be built with (docs/layout.md, "LibTorch versions"), instead of failing
# deep in the compilation or the link: one older than 2.0, and one built for the pre-C++11
# libstdc++ ABI (as the PyPI wheels before 2.7 are). Stand-in Torch packages report a version
# and flags; the configure must stop at them (nothing is compiled).
# Usage: test_torch_version_floor.sh REPO
set -euo pipefail
root=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# configure VERSION CXX_FLAGS: configures against a stand-in LibTorch, log in $work/log-VERSION.
configure() {
  local pkg="$work/torch-$1"
  mkdir -p "$pkg"
  printf 'set(PACKAGE_VERSION "%s")\nset(PACKAGE_VERSION_COMPATIBLE TRUE)\n' "$1" >"$pkg/TorchConfigVersion.cmake"
  printf 'set(TORCH_FOUND TRUE)\nset(TORCH_LIBRARIES "")\nset(TORCH_INCLUDE_DIRS "")\nset(TORCH_CXX_FLAGS "%s")\n' \
    "$2" >"$pkg/TorchConfig.cmake"
  cmake -S "$root" -B "$work/build-$1" -DTorch_DIR="$pkg" >"$work/log-$1" 2>&1
}

# refused VERSION CXX_FLAGS EXPECTED_MESSAGE
refused() {
  local pkg="$work/torch-$1" log="$work/log-$1"
  if configure "$1" "$2"; then
    echo "FAIL: configured against LibTorch $1 ($2)" >&2; exit 1
  fi
  local expect="LibTorch $1 (Torch_DIR=$pkg) $3"
  if ! tr -s ' \n' ' ' <"$log" | grep -qF "$expect"; then
    echo "FAIL: no message '$expect' in:" >&2; cat "$log" >&2; exit 1
  fi
}
refused 1.13.1 "-D_GLIBCXX_USE_CXX11_ABI=1" "is too old: rpe-train needs LibTorch 2.0 or newer"
refused 2.1.2 "-D_GLIBCXX_USE_CXX11_ABI=0" "is built for the pre-C++11 libstdc++ ABI (-D_GLIBCXX_USE_CXX11_ABI=0)"
# The floor itself passes both checks (the stand-in has no libraries, so the configure may stop
# later, but not at them).
configure 2.0.0 "-D_GLIBCXX_USE_CXX11_ABI=1" || true
if grep -qE "is too old|pre-C\+\+11" "$work/log-2.0.0"; then
  echo "FAIL: LibTorch 2.0.0 (C++11 ABI) refused:" >&2; cat "$work/log-2.0.0" >&2; exit 1
fi
echo "torch_version_floor: passed (1.13.1 and a pre-C++11-ABI 2.1.2 refused at configure time)"
