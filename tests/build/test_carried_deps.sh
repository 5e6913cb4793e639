#!/usr/bin/env bash
# ctest carried_deps: the folder scripts/pack_deps.sh packs is all a machine without the Debian
# -dev packages needs to configure rpe-train (the GPU check's build step; docs/gpu.md). Inside
# scripts/without_system_libs.sh (the system's copies of the packed packages hidden, no
# pkg-config, no ccache), CMake must configure against the packed folder and find every library
# there; with yaml-cpp taken out of the folder it must stop naming yaml-cpp (the hiding works:
# the system's copy is not found instead). A whole build this way takes ~40 minutes on 2 cores:
# it was done by hand (docs/gpu.md); the configure catches a dependency added to the build but
# not to pack_deps.sh.
# Usage: test_carried_deps.sh REPO PYTHON. Exit 77 (ctest's skip) where no mount namespace can
# be made or the packages cannot be downloaded.
set -euo pipefail
root=$(cd "$1" && pwd) py=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$root"
unshare -rm bash -c 'mount --bind /usr/bin /usr/bin' 2>/dev/null || { echo "SKIP: no mount namespace here (unshare -rm)"; exit 77; }
if [[ -f deps/PACKAGES ]]; then
  cp -a deps "$work/deps"  # packed already (the GPU session's preparation)
elif ! scripts/pack_deps.sh "$work/deps" >"$work/pack.log" 2>&1; then
  echo "SKIP: scripts/pack_deps.sh could not download the packages:"; tail -3 "$work/pack.log"; exit 77
fi

configure() {  # configure DEPS BUILD LOG: gpu_check.sh's environment and configure (scripts/gpu_env.sh)
  scripts/without_system_libs.sh --deps "$1" -- bash -c '
    say() { :; }; fail() { echo "$*" >&2; exit 1; }
    source scripts/gpu_env.sh && gpu_env "$0" "$1" "$2" && gpu_configure "$0" "$2"' \
    "$py" "$1" "$2" >"$3" 2>&1
}

configure "$work/deps" "$work/build" "$work/ok.log" || { echo "FAIL: configure with the packed libraries:"; tail -30 "$work/ok.log"; exit 1; }
cache=$work/build/CMakeCache.txt
for key in yaml-cpp_DIR spdlog_DIR fmt_DIR nlohmann_json_DIR CLI11_DIR GTest_DIR RPE_GLOO_INCLUDE_DIR \
           pkgcfg_lib_SENTENCEPIECE_sentencepiece pkgcfg_lib_UTF8PROC_utf8proc PKG_CONFIG_EXECUTABLE; do
  value=$(sed -n "s/^$key:[A-Z]*=//p" "$cache")
  [[ $value == "$work/deps/"* ]] || { echo "FAIL: $key = '$value', not in the packed folder"; exit 1; }
done

# The control: without yaml-cpp in the folder the system's copy must stay hidden.
rm -rf "$work/deps/usr/lib/"*/cmake/yaml-cpp "$work/deps/usr/share/cmake/yaml-cpp" "$work/deps/usr/include/yaml-cpp"
if configure "$work/deps" "$work/build_no_yaml" "$work/no_yaml.log"; then
  echo "FAIL: configured without yaml-cpp in the packed folder: the system's copy was not hidden"; exit 1
fi
grep -qi "yaml-cpp" "$work/no_yaml.log" || { echo "FAIL: the refusal does not name yaml-cpp:"; tail -20 "$work/no_yaml.log"; exit 1; }
grep -i -m1 "yaml-cpp" "$work/no_yaml.log"
echo "carried_deps: passed (configured from the packed folder alone, 10 libraries and pkg-config found there; refused without its yaml-cpp)"
