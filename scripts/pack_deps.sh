#!/usr/bin/env bash
# Packs the Debian libraries rpe-train builds against (the -dev packages of
# scripts/install_deps.sh, their shared libraries, and pkg-config) into one folder that can be
# carried to a machine without apt, root or network -- a GPU node, a cluster login node -- where
# scripts/gpu_check.sh (or cmake with the variables it sets) builds against it. Only
# `apt-get download` and `dpkg -x`: no root, nothing installed here.
# Usage: scripts/pack_deps.sh [DEST]   (default deps/; rerun = refresh)
# Then on the other machine: scripts/gpu_check.sh --deps DEST
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-deps}
DEV=(libsentencepiece-dev libyaml-cpp-dev libspdlog-dev libfmt-dev nlohmann-json3-dev libcli11-dev libgtest-dev
     libutf8proc-dev libgloo-dev zlib1g-dev)
TOOLS=(pkgconf pkgconf-bin libpkgconf3)
# Each -dev package's own library packages (Depends: lib..., not the C/C++ runtime everyone has).
libs=()
for p in "${DEV[@]}"; do
  while read -r dep; do
    case $dep in
      libc6 | libc6-dev | libgcc-s1 | libstdc++6 | libc-dev | lib*-dev | "<"*) ;;
      lib* | zlib1g) libs+=("$dep") ;;
    esac
  done < <(apt-cache depends "$p" | awk '/^  Depends:/{print $2}')
done
pkgs=("${DEV[@]}" "${libs[@]}" "${TOOLS[@]}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "[pack_deps] downloading ${#pkgs[@]} packages: ${pkgs[*]}"
chmod a+rwx "$work"  # apt-get download drops to user _apt
(cd "$work" && apt-get download "${pkgs[@]}" >/dev/null)
rm -rf "$dest.tmp"
mkdir -p "$dest.tmp"
for deb in "$work"/*.deb; do dpkg -x "$deb" "$dest.tmp"; done
# pkg-config files name /usr; gpu_check.sh sets PKG_CONFIG_SYSROOT_DIR=DEST to move them.
ln -sf pkgconf "$dest.tmp/usr/bin/pkg-config"
printf '%s\n' "${pkgs[@]}" >"$dest.tmp/PACKAGES"
rm -rf "$dest"
mv "$dest.tmp" "$dest"
echo "[pack_deps] $dest: $(du -sh "$dest" | cut -f1) ($(wc -l <"$dest/PACKAGES") packages); carry it with the checkout"
