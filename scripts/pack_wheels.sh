#!/usr/bin/env bash
# Downloads the Hugging Face baseline's Python wheels for a GPU machine without a package
# registry (docs/gpu.md): transformers 4.x (5.x removed BERT's relative_key types) with the
# huggingface_hub and tokenizers versions it accepts, the same versions as this checkout's .venv
# (tests/requirements.txt), for CPython 3.10-3.13 on x86-64 Linux (~15 MB).
# Usage: scripts/pack_wheels.sh [DEST]   (default wheels/, git-ignored)
# On the GPU machine: scripts/gpu_check.sh --wheels DEST installs them into a private folder for
# bench/hf_bench.py alone (nothing installed into that machine's Python).
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-wheels}
py=.venv/bin/python
[[ -x $py ]] || { echo "pack_wheels.sh: no .venv (scripts/install_deps.sh --test) to take the versions from" >&2; exit 2; }
pins=$("$py" - <<'PY'
import importlib.metadata as m, sys
try:
    v = {n: m.version(n) for n in ("transformers", "huggingface_hub", "tokenizers")}
except m.PackageNotFoundError as e:
    sys.exit(f"pack_wheels.sh: .venv lacks {e} (scripts/install_deps.sh --test)")
if not v["transformers"].startswith("4."):
    sys.exit(f"pack_wheels.sh: .venv has transformers {v['transformers']}, need 4.x")
print(" ".join(f"{n}=={x}" for n, x in v.items()))
PY
) || exit 2
tmp="$dest.tmp.$$"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp"
# py3-none-any wheels and tokenizers' abi3 one serve every CPython 3; name 3.12 for the resolver.
"$py" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d "$tmp" $pins
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
echo "pack_wheels.sh: $dest: $pins ($(du -sh "$dest" | cut -f1))"
