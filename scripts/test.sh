#!/usr/bin/env bash
# The test command (CI runs exactly this): install and build if needed, then run the
# whole suite with ctest. Non-zero exit on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install_deps.sh --test
./scripts/build.sh
cd build
ctest --output-on-failure --timeout 1200 -j "$(nproc)" "$@"
