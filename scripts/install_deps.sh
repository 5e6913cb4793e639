#!/usr/bin/env bash
# Installs everything rpe-train needs to build and test, idempotently:
#   - Debian packages (compiler tool chain and the C++ libraries) with apt-get,
#   - LibTorch from the PyPI wheel torch==2.11.0 into the project-local .venv,
#   - with --test: the Python packages the parity tests use (transformers 4.x).
# A second run installs nothing and takes a few seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

TORCH_VERSION="${RPE_TORCH_VERSION:-2.11.0}"
WITH_TEST=0
for arg in "$@"; do
  case "$arg" in
    --test) WITH_TEST=1 ;;
    *) echo "usage: $0 [--test]" >&2; exit 2 ;;
  esac
done

APT_PACKAGES=(build-essential cmake ninja-build ccache pkg-config git python3 python3-venv
  libsentencepiece-dev libyaml-cpp-dev libspdlog-dev libfmt-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libutf8proc-dev libgloo-dev zlib1g-dev)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[deps] installing Debian packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  echo "[deps] creating .venv"
  python3 -m venv .venv
fi
if ! .venv/bin/python -c "import torch, sys; sys.exit(0 if torch.__version__.split('+')[0] == '$TORCH_VERSION' else 1)" 2>/dev/null; then
  echo "[deps] installing torch==$TORCH_VERSION (LibTorch) into .venv — a few GB the first time"
  .venv/bin/pip install -q --disable-pip-version-check "torch==$TORCH_VERSION"
fi
if ((WITH_TEST)); then
  if ! .venv/bin/python -c "import transformers, sys; sys.exit(0 if transformers.__version__.startswith('4.') else 1)" 2>/dev/null; then
    echo "[deps] installing test requirements into .venv"
    .venv/bin/pip install -q --disable-pip-version-check -r tests/requirements.txt
  fi
fi
echo "[deps] ok: $(.venv/bin/python -c 'import torch; print("torch", torch.__version__)')"
