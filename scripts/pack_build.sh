#!/usr/bin/env bash
# Packs this machine's build for a GPU machine whose time is too short to build there
# (docs/gpu.md): the four programs the GPU check runs -- rpe-train, rpe_tests, rpe-bench-model,
# rpe-bench-optim -- and built_with.txt (the LibTorch version and the git revision). A build
# against a CUDA LibTorch runs on a GPU as it is: its CUDA sources (m3's scores, the relative layout, add & norm) are
# compiled by nvcc for sm_80 and sm_90 with PTX for newer GPUs, every other kernel is
# LibTorch's, so only the torch versions must agree, which scripts/gpu_env.sh checks there. Carry it with deps/ (scripts/pack_deps.sh) and pass --build-dir DEST.
# Usage: scripts/pack_build.sh [DEST] [--build-dir DIR] [--python PY] [--programs a,b]   (default
# gpu-build, build, .venv/bin/python: the Python whose torch the build used; all four programs).
# --programs packs some of them: the second stage (scripts/gpu_table2.sh) runs rpe-train and
# rpe-bench-model only, ~10 MB less of a call's 64 MiB carry. Exit 2 on a bad request.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=gpu-build BUILD=build PY=.venv/bin/python WANT=""
while (($#)); do
  case $1 in
    --build-dir) BUILD=$2; shift ;;
    --python) PY=$2; shift ;;
    --programs) WANT=$2; shift ;;
    -*) echo "usage: $0 [DEST] [--build-dir DIR] [--python PY] [--programs a,b]" >&2; exit 2 ;;
    *) DEST=$1 ;;
  esac
  shift
done
refuse() { echo "pack_build: $*" >&2; exit 2; }
PROGRAMS=(rpe-train rpe_tests rpe-bench-model rpe-bench-optim)
if [[ -n $WANT ]]; then
  IFS=, read -r -a picked <<<"$WANT"
  for p in "${picked[@]}"; do
    [[ " ${PROGRAMS[*]} " == *" $p "* ]] || refuse "--programs: '$p' is not one of ${PROGRAMS[*]}"
  done
  PROGRAMS=("${picked[@]}")
fi
for p in "${PROGRAMS[@]}"; do
  [[ -x $BUILD/$p ]] || refuse "$BUILD/$p not found (scripts/build.sh builds them, tests included)"
done
[[ -f $BUILD/CMakeCache.txt ]] || refuse "$BUILD/CMakeCache.txt not found: not a CMake build folder"
command -v "$PY" >/dev/null || refuse "no Python at $PY (--python: the one whose torch the build used)"
# The build's LibTorch must be this Python's torch, and a CUDA build of it.
torch_dir=$(sed -n 's/^Torch_DIR:[A-Z]*=//p' "$BUILD/CMakeCache.txt")  # PATH when found, untyped from -DTorch_DIR=
read -r version cuda prefix < <("$PY" -c "import torch, torch.utils; print(torch.__version__, torch.version.cuda, torch.utils.cmake_prefix_path)" 2>/dev/null) \
  || refuse "$PY has no torch (--python: the one whose torch the build used)"
[[ -n $torch_dir && -d $torch_dir && $(cd "$torch_dir" && pwd -P) == $(cd "$prefix/Torch" && pwd -P) ]] \
  || refuse "$BUILD was built against the LibTorch in $torch_dir, not $PY's torch ($prefix/Torch)"
[[ $cuda != None ]] || refuse "$PY's torch $version is a CPU-only build: its programs cannot use a GPU"
# The programs must be the checkout's: a build older than its last commit would carry old code.
built=$("$BUILD/rpe-train" --version 2>/dev/null | sed -n '1s/.*(\(.*\))$/\1/p')
here=$(git describe --always --dirty 2>/dev/null || echo unknown)
[[ $here == unknown || $built == "$here" ]] \
  || refuse "$BUILD/rpe-train is of revision ${built:-unknown}, the checkout of $here: run scripts/build.sh first"
[[ ! -e $DEST ]] || refuse "$DEST exists (remove it first)"
tmp=$(mktemp -d "$DEST.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
for p in "${PROGRAMS[@]}"; do cp "$BUILD/$p" "$tmp/"; done
printf 'torch %s\nrevision %s\n' "$version" "${built:-unknown}" >"$tmp/built_with.txt"
mv "$tmp" "$DEST"
trap - EXIT
echo "pack_build: $DEST ($(du -sh "$DEST" | cut -f1)): ${PROGRAMS[*]}, built against torch $version (CUDA $cuda)"
