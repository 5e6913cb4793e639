#!/usr/bin/env python3
"""Compiles every source, test and benchmark against the headers of other LibTorch versions.

The build links one LibTorch (the pinned wheel's), but -DTorch_DIR= may name any 2.x; API
differences live in src/util/torch_compat.h (docs/layout.md, "LibTorch versions"). For each
VERSION this fetches the torch wheel of that version from the package index (pip download,
headers only are kept, cached), then reruns every command of BUILD/compile_commands.json with
-fsyntax-only and that version's include folders in place of the build's. Nothing is linked
or run. Prints one block per failing file and exits 1 if any failed.

Usage: check_torch_headers.py [--build DIR] [--cache DIR] [--jobs N] VERSION [VERSION ...]
  e.g. scripts/check_torch_headers.py 2.0.1 2.1.2 2.4.1   (after ./scripts/build.sh)
"""
import argparse
import concurrent.futures
import glob
import json
import os
import shlex
import subprocess
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def usage_error(message):
    print(f"check_torch_headers.py: {message}", file=sys.stderr)
    sys.exit(2)


def headers(version, cache):
    """The torch/include folder of torch==version, fetched once into cache."""
    dest = os.path.join(cache, version)
    include = os.path.join(dest, "torch", "include")
    if os.path.isdir(include):
        return include
    wheels = os.path.join(cache, "wheels")
    os.makedirs(wheels, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", f"torch=={version}",
                    "-d", wheels], check=True)
    wheel = sorted(glob.glob(os.path.join(wheels, f"torch-{version}-*.whl")))[-1]
    with zipfile.ZipFile(wheel) as z:
        z.extractall(dest + ".part", [n for n in z.namelist() if n.startswith("torch/include/")])
    os.rename(dest + ".part", dest)
    os.remove(wheel)  # hundreds of MB; the headers are all that is used
    return include


def syntax_command(entry, build_include, include):
    """The entry's compile command, checking syntax only, against another torch/include."""
    args, out, skip = shlex.split(entry["command"]), [], False
    for i, a in enumerate(args):
        nxt = args[i + 1] if i + 1 < len(args) else ""
        if skip:
            skip = False
        elif a == "-o" or (a == "-include" and "cmake_pch" in nxt):
            skip = True  # nothing is written; a precompiled header of the other version would not fit
        elif "cmake_pch" not in a and a != "-Winvalid-pch":
            out.append(a.replace(build_include, include))
    return out[:1] + ["-fsyntax-only"] + out[1:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("versions", nargs="+", metavar="VERSION")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--cache", default=os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
                                                    "rpe-train", "torch-headers"))
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    a = ap.parse_args()
    commands = os.path.join(a.build, "compile_commands.json")
    if not os.path.isfile(commands):
        usage_error(f"{commands}: not found; build first (./scripts/build.sh)")
    entries = {}
    for e in json.load(open(commands)):
        entries.setdefault(e["file"], e)  # a file built into two targets is checked once
    flags = next(iter(entries.values()))["command"]
    build_include = next((f for f in shlex.split(flags) if f.rstrip("/").endswith("torch/include")), None)
    if build_include is None:
        usage_error(f"{commands}: no torch/include folder in its compile commands")
    failed = 0
    for version in a.versions:
        include = headers(version, a.cache)

        def check(entry):
            cmd = syntax_command(entry, build_include, include)
            p = subprocess.run(cmd, cwd=entry["directory"], capture_output=True, text=True)
            return entry["file"], p.returncode, p.stderr

        bad = 0
        with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
            for file, rc, err in pool.map(check, entries.values()):
                if rc:
                    bad += 1
                    errors = [line for line in err.splitlines() if "error" in line]
                    print(f"LibTorch {version}: {os.path.relpath(file, ROOT)}\n  " + "\n  ".join(errors[:10]))
        print(f"LibTorch {version}: {len(entries) - bad} of {len(entries)} files compile", flush=True)
        failed += bad
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
