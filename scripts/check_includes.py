#!/usr/bin/env python3
"""Checks that includes in src/ run downward along the data flow (docs/layout.md).

Each folder of src/ is a stage; a file may include headers of its own stage or of a stage
below it in LAYERS, never above, and no chain of includes between files may come back to
where it started. Prints one line per violation and exits 1 if there is any.

Usage: check_includes.py [SRC_DIR]   (default: the src/ next to this script's folder)
"""
import os
import re
import sys

# Lowest first. eval holds metrics and tables on plain result rows (it includes only util),
# so finetune, which scores its dev sets with those metrics, sits above it.
LAYERS = ["util", "config", "data", "model", "dist", "train", "interop", "eval", "finetune", "cli"]
GENERATED = {"rpe"}  # rpe/version.h, written by CMake into the build folder
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def read_includes(src):
    """{file relative to src: [(line number, included path relative to src)]}"""
    out = {}
    for root, _, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith((".h", ".cpp")):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, src)
            with open(path, encoding="utf-8") as f:
                out[rel] = [(n, m.group(1)) for n, line in enumerate(f, 1) if (m := INCLUDE.match(line))]
    return out


def stage_violations(includes):
    errors = []
    for rel, incs in sorted(includes.items()):
        stage = rel.split(os.sep)[0]
        if stage not in LAYERS:
            errors.append(f"src/{rel}: folder '{stage}' is not a stage in LAYERS of {os.path.basename(__file__)}")
            continue
        for line, inc in incs:
            target = inc.split("/")[0]
            if "/" not in inc or target in GENERATED:
                continue
            if target not in LAYERS:
                errors.append(f"src/{rel}:{line}: includes \"{inc}\" from an unknown stage '{target}'")
            elif LAYERS.index(target) > LAYERS.index(stage):
                errors.append(f"src/{rel}:{line}: includes \"{inc}\": {stage} may not include {target} "
                              f"(includes run downward: {' < '.join(LAYERS)})")
    return errors


def cycle_violations(includes):
    graph = {rel: [inc for _, inc in incs if inc in includes] for rel, incs in includes.items()}
    state, stack, errors = {}, [], []

    def visit(node):  # iterative enough for a few hundred files: recursion depth = include depth
        state[node] = "open"
        stack.append(node)
        for nxt in graph[node]:
            if state.get(nxt) == "open":
                cycle = stack[stack.index(nxt):] + [nxt]
                errors.append("include cycle: " + " -> ".join("src/" + c for c in cycle))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return errors


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "src")
    includes = read_includes(src)
    if not includes:
        print(f"{src}: no C++ files found", file=sys.stderr)
        return 2
    errors = stage_violations(includes) + cycle_violations(includes)
    for e in errors:
        print(e)
    if not errors:
        print(f"includes ok: {len(includes)} files, stages {' < '.join(LAYERS)}, no cycle")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
