# Sourced by scripts/gpu_check.sh and scripts/gpu_table2.sh: the environment rpe-train's
# programs build and run in on a machine without apt or network (a GPU node).
#   gpu_env PYTHON DEPS BUILD
# - DEPS/usr (scripts/pack_deps.sh): its Debian libraries for CMake and pkg-config, and on
#   LD_LIBRARY_PATH for every program that runs;
# - PYTHON's torch/lib and its wheel's CUDA runtime (nvidia/*/lib) on LD_LIBRARY_PATH: a build
#   carried from another machine (scripts/pack_build.sh) finds LibTorch there (its runpath
#   names the other machine's), and libcudart without a toolkit registered with the loader;
# - BUILD/built_with.txt (a carried build): PYTHON's torch must be the version it was built
#   against, else it refuses, saying so;
# - RPE_SOURCE_DIR=this checkout, where the test program reads the repository's files.
# gpu_same_torch PYTHON BUILD: a build folder of this machine (BUILD/CMakeCache.txt) must have
# been built against PYTHON's torch, whose lib/ gpu_env puts first in line: another LibTorch's
# programs would stop with a bare "symbol lookup error". Refuses, naming both, otherwise.
# gpu_torch_dir BUILD: the LibTorch CMake folder BUILD was configured with (-DTorch_DIR= leaves it
# untyped in the cache, a found one is a PATH).
# Prints what it did (say) and exits 1 through fail, as the scripts that source it define them.
# gpu_configure PYTHON BUILD: the GPU check's CMake configure, LibTorch from PYTHON's torch wheel
# (CMake itself only looks for the repository's .venv); after gpu_env, in the repository root.
gpu_configure() {
  local torch_cmake
  torch_cmake=$("$1" -c "import torch.utils; print(torch.utils.cmake_prefix_path)") || fail "$1 has no torch"
  cmake -S . -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRPE_BUILD_TESTS=ON -DTorch_DIR="$torch_cmake/Torch"
}

gpu_torch_dir() { sed -n 's/^Torch_DIR:[A-Z]*=//p' "$1/CMakeCache.txt"; }

gpu_same_torch() {
  local py=$1 build=$2 built prefix
  [[ -f $build/CMakeCache.txt ]] || return 0  # a carried build: gpu_env checked built_with.txt
  built=$(gpu_torch_dir "$build")
  prefix=$("$py" -c "import torch.utils; print(torch.utils.cmake_prefix_path)") || fail "$py has no torch"
  [[ -n $built && -d $built && $(cd "$built" && pwd -P) == $(cd "$prefix/Torch" && pwd -P) ]] \
    || fail "$build was built against the LibTorch in ${built:-(none recorded)}, not $py's torch ($prefix/Torch): pass --python with that torch, or build again"
}

gpu_env() {
  local py=$1 deps=$2 build=$3 torch_lib cuda_libs want have
  if [[ -d $deps/usr ]]; then
    local d
    d=$(cd "$deps" && pwd)
    export CMAKE_PREFIX_PATH="$d/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
    export PKG_CONFIG_LIBDIR="$d/usr/lib/x86_64-linux-gnu/pkgconfig:$d/usr/share/pkgconfig"  # only these
    export PKG_CONFIG_SYSROOT_DIR="$d" PATH="$d/usr/bin:$PATH"
    export LD_LIBRARY_PATH="$d/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    command -v pkg-config >/dev/null || ln -sf pkgconf "$d/usr/bin/pkg-config"
    say "using the libraries packed in $d"
  fi
  torch_lib=$("$py" -c "import os, torch; print(os.path.join(os.path.dirname(torch.__file__), 'lib'))") \
    || fail "$py has no torch"
  # The CUDA runtime the programs link (libcudart.so.13, not in torch/lib) from the wheel that
  # LibTorch loads it from itself (nvidia/cu13/lib beside torch), not whatever toolkit the loader knows.
  cuda_libs=$("$py" -c "import glob, os, torch
base = os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), 'nvidia')
print(':'.join(sorted({os.path.dirname(p) for p in glob.glob(os.path.join(base, '*', 'lib', 'libcudart.so*'))})))")
  export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$torch_lib${cuda_libs:+:$cuda_libs}"
  if [[ -f $build/built_with.txt ]]; then
    want=$(sed -n 's/^torch //p' "$build/built_with.txt")
    have=$("$py" -c "import torch; print(torch.__version__)")
    [[ $want == "$have" ]] || fail "$build was built against torch $want, but $py has torch $have: build here instead (--only build)"
    say "using the build carried in $build ($(tr '\n' ' ' <"$build/built_with.txt"))"
  fi
  export RPE_SOURCE_DIR=$PWD
}
