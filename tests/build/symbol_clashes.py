"""Two shared libraries that export a data object of the same name and different sizes: the
dynamic linker binds every reference to the first one in load order, so the other library's
constructor writes its larger object over its neighbours' memory. (Debian's libsentencepiece
and libc10 both export FLAGS_minloglevel, 32 and 4 bytes: with libc10 first, LibTorch's errors
became process aborts; CMakeLists.txt links sentencepiece first.) For every such name among the
binary's libraries, the first in load order must hold the largest object.
Usage: symbol_clashes.py BINARY"""
import re
import shutil
import subprocess
import sys

SKIP = 77


def data_objects(lib):
    """{name: size} of the data objects `lib` exports."""
    out = subprocess.run(["nm", "-D", "-S", "--defined-only", lib], capture_output=True, text=True).stdout
    objects = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 4 and f[2] in ("B", "D", "V"):
            objects[f[3]] = int(f[1], 16)
    return objects


def main():
    if not shutil.which("nm") or not shutil.which("ldd"):
        print("SKIP: no nm/ldd")
        return SKIP
    ldd = subprocess.run(["ldd", sys.argv[1]], capture_output=True, text=True, check=True).stdout
    libs = re.findall(r"^\s*(?:\S+ => )?(/\S+) \(0x", ldd, re.M)  # in the loader's search order (preloads first)
    first = {}  # name -> (size, library) of the definition references bind to
    bad = 0
    for lib in libs:
        for name, size in data_objects(lib).items():
            if name not in first:
                first[name] = (size, lib)
            elif size != first[name][0]:
                ok = size < first[name][0]
                bad += not ok
                print(f"{'ok' if ok else 'CLASH'}: {name}: {first[name][1]} ({first[name][0]} bytes) is found "
                      f"before {lib} ({size} bytes)")
    print(f"{len(libs)} libraries, {bad} clash(es) where a smaller object is found first")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
