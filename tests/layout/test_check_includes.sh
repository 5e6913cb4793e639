#!/usr/bin/env bash
# scripts/check_includes.py passes on src/ and fails, naming the line, on a copy of src/ with an
# upward include (util -> cli) and, separately, with an include cycle.
# Usage: test_check_includes.sh SOURCE_DIR
set -euo pipefail
src=$1
check="python3 $src/scripts/check_includes.py"
$check "$src/src"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
expect_fail() {  # expect_fail PATTERN: the checker exits 1 and prints PATTERN
  local out rc=0
  out=$($check "$work/src") || rc=$?
  [ "$rc" -eq 1 ] || { echo "expected exit 1, got $rc: $out"; exit 1; }
  grep -q "$1" <<<"$out" || { echo "expected '$1' in: $out"; exit 1; }
}
cp -r "$src/src" "$work/src"
echo '#include "cli/commands.h"' >>"$work/src/util/errors.h"
expect_fail 'src/util/errors.h:[0-9]*: includes "cli/commands.h": util may not include cli'
rm -rf "$work/src" && cp -r "$src/src" "$work/src"
echo '#include "util/log.h"' >>"$work/src/util/errors.h"
echo '#include "util/errors.h"' >>"$work/src/util/log.h"
expect_fail 'include cycle: src/util/errors.h -> src/util/log.h -> src/util/errors.h'
echo "check_includes: ok"
