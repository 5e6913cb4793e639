#!/usr/bin/env bash
# Runs a command as if on a machine without the Debian libraries that scripts/pack_deps.sh
# packs -- a GPU node, a cluster without root -- so that a machine with apt can check that the
# packed folder alone suffices to configure, build and run rpe-train (docs/gpu.md).
#
# In a private mount namespace (unshare: root, or unprivileged user namespaces), /usr/include,
# /usr/lib/<triplet>, /usr/share and /usr/bin are replaced by hard-linked copies without the
# files of every package listed in DEPS/PACKAGES (their -dev headers, CMake and pkg-config
# files, shared libraries and pkg-config itself; zlib's runtime stays, as on any machine) and
# without ccache (a bare machine has none: the build then takes the precompiled-header path).
# Nothing changes outside the namespace; the copies are removed afterwards.
# Usage: scripts/without_system_libs.sh [--deps DIR] -- COMMAND [ARGS...]   (DIR default deps)
# Exit: COMMAND's status; 2 on a bad request; 77 when this machine cannot make the namespace.
set -euo pipefail
DEPS=deps
while (($#)); do
  case $1 in
    --deps) DEPS=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "usage: $0 [--deps DIR] -- COMMAND [ARGS...]" >&2; exit 2 ;;
  esac
done
(($#)) || { echo "usage: $0 [--deps DIR] -- COMMAND [ARGS...]" >&2; exit 2; }
[[ -f $DEPS/PACKAGES ]] || { echo "without_system_libs: no $DEPS/PACKAGES (scripts/pack_deps.sh $DEPS)" >&2; exit 2; }
command -v dpkg-query >/dev/null || { echo "without_system_libs: needs dpkg (Debian or Ubuntu)" >&2; exit 2; }
# A namespace that cannot bind-mount (some containers) would fail COMMAND for the wrong reason.
unshare -rm bash -c 'mount --bind /usr/bin /usr/bin' 2>/dev/null \
  || { echo "without_system_libs: cannot bind-mount in a private mount namespace here (unshare -rm)" >&2; exit 77; }

triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
declare -A DIRS=([include]=/usr/include [lib]=/usr/lib/$triplet [share]=/usr/share [bin]=/usr/bin)
room=$(mktemp -d "${TMPDIR:-/tmp}/without_system_libs.XXXXXX")
trap 'rm -rf "$room"' EXIT
for d in "${!DIRS[@]}"; do
  # hard links: instant and free, but only within one file system
  cp -al "${DIRS[$d]}" "$room/$d" 2>/dev/null \
    || { echo "without_system_libs: cannot hard-link ${DIRS[$d]} into $room (another file system: set TMPDIR)" >&2; exit 2; }
done
hidden=0
while read -r pkg; do
  [[ $pkg == zlib1g ]] && continue  # libz.so.1 is on every machine (Python needs it)
  while read -r f; do
    for d in "${!DIRS[@]}"; do
      prefix=${DIRS[$d]}/
      [[ $f == "$prefix"* ]] || continue
      copy=$room/$d/${f#"$prefix"}
      if [[ -f $copy || -L $copy ]]; then rm -f "$copy"; hidden=$((hidden + 1)); fi
    done
  done < <(dpkg-query -L "$pkg" 2>/dev/null || true)
done <"$DEPS/PACKAGES"
rm -f "$room/bin/ccache"
echo "[without_system_libs] hid $hidden files of $(wc -l <"$DEPS/PACKAGES") packages, and ccache" >&2
# The mounts live and die with the namespace (COMMAND and its children); the copies after it.
status=0
ROOM=$room LIBDIR=/usr/lib/$triplet unshare -rm bash -c '
  mount --bind "$ROOM/include" /usr/include && mount --bind "$ROOM/lib" "$LIBDIR" &&
    mount --bind "$ROOM/share" /usr/share && mount --bind "$ROOM/bin" /usr/bin && exec "$@"' _ "$@" || status=$?
exit "$status"
