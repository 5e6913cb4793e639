#!/usr/bin/env bash
# Configures (once) and builds rpe-train in Release into build/. Incremental after the
# first run. Pass extra CMake options through, e.g. -DTorch_DIR=/opt/libtorch/share/cmake/Torch.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${RPE_BUILD_DIR:-build}"
GENERATOR=()
command -v ninja >/dev/null && GENERATOR=(-G Ninja)
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ] || [ $# -gt 0 ]; then
  cmake -S . -B "$BUILD_DIR" "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
fi
cmake --build "$BUILD_DIR" --parallel "$(nproc)"
