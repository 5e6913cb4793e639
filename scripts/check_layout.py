#!/usr/bin/env python3
"""Checks the developers' guide's size limits on the C++ sources in src/ and bench/: no file
over 400 lines and no function over 80 lines. Lists every offender and exits 1 if there is
one, else prints nothing and exits 0 (ctest runs it as `layout_limits`, so the limits stay true).

A function is a brace block opened at namespace or class scope after a parameter list (free
functions, member definitions in or out of the class, constructors with initializer lists).
Blocks inside a function (lambdas, loops, local classes) count as part of that function, not
separately. Its length runs from the line of its parameter list's '(' to its closing brace.
Comments, string and character literals and preprocessor lines are blanked before the scan.

Usage: python3 scripts/check_layout.py [--max-file-lines N] [--max-function-lines N] [DIR...]
       (default DIR: src/ and bench/ next to this script, what the ctest checks)
"""
import argparse
import re
import sys
from pathlib import Path

SUFFIXES = {".cpp", ".cc", ".cxx", ".h", ".hpp", ".hh"}
# Qualifiers and trailing return types that may follow a parameter list.
# Matched at the end of the text before a '{': a macro call without ';' may precede them.
SCOPE_HEAD = re.compile(r"\bnamespace(?:\s+[\w:]+)?\s*$|\bextern\s*\"\"\s*$")
ACCESS_LABELS = re.compile(r"^(?:(?:public|private|protected)\s*:\s*)+")
TYPE_HEAD = re.compile(r"\b(?:class|struct|union|enum)\b[^()]*$")
NAME_BEFORE_PAREN = re.compile(r"(operator\s*(?:\(\)|[^\s\w(]+)|[~\w:<>,\s]*?[~\w]+)\s*$")


def blank_code(text):
    """The text with comments, string/char literals and preprocessor lines replaced by
    spaces; newlines are kept so offsets map to the same line numbers."""
    out = list(text)
    i, n = 0, len(text)
    line_start = True

    def blank(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if line_start and c == "#":
            # A directive runs to the end of the line, continued by a trailing backslash.
            j = i
            while j < n and (text[j] != "\n" or text[j - 1] == "\\"):
                j += 1
            blank(i, j)
            i = j
            continue
        if c == "\n":
            line_start = True
            i += 1
            continue
        if not c.isspace():
            line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            blank(i, j)
            i = j
        elif c == "R" and text.startswith('"', i + 1) and not _ident_char(text, i - 1):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i + m.end())
            j = n if end < 0 else end + len(m.group(1)) + 2
            blank(i + 1, j)
            i = j
        elif c == '"' or (c == "'" and not _digit_separator(text, i)):
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            blank(i + 1, min(j, n))
            i = j + 1
        else:
            i += 1
    return "".join(out)


def _ident_char(text, i):
    return i >= 0 and (text[i].isalnum() or text[i] == "_")


def _digit_separator(text, i):
    """True for the ' in 1'000'000 (C++14 digit separators), false for a char literal."""
    j = i - 1
    while j >= 0 and (text[j].isalnum() or text[j] in "_.'"):
        j -= 1
    return j + 1 < i and text[j + 1].isdigit()


def strip_template_prefix(head):
    """`template <...> struct X` -> `struct X` (angle brackets balanced)."""
    m = re.match(r"template\s*<", head)
    if not m:
        return head
    depth, k = 1, m.end()
    while k < len(head) and depth:
        depth += {"<": 1, ">": -1}.get(head[k], 0)
        k += 1
    return strip_template_prefix(head[k:].lstrip())


def first_top_level_paren(head):
    depth = 0
    for k, ch in enumerate(head):
        if ch == "(" and depth == 0:
            return k
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
    return -1


def matching_paren(head, open_at):
    depth = 0
    for k in range(open_at, len(head)):
        depth += {"(": 1, ")": -1}.get(head[k], 0)
        if depth == 0:
            return k
    return len(head)


def top_level_assignment(head):
    """An `=` outside brackets means an initializer (`auto f = [](...) {`, a default member
    initializer), not a function; `operator=`, `==`, `<=`, `>=`, `!=` do not count."""
    depth = 0
    for k, ch in enumerate(head):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "=" and depth == 0 and head[k - 1:k] not in ("=", "<", ">", "!") \
                and head[k + 1:k + 2] != "=" and not re.search(r"operator\s*$", head[:k]):
            return True
    return False


def open_parens(head):
    return head.count("(") - head.count(")")


def classify(head):
    """'scope' (namespace, extern "C"), 'type' (class/struct/union/enum), 'function' or
    'other' (an initializer list, array or aggregate) for the text before a '{'."""
    head = strip_template_prefix(ACCESS_LABELS.sub("", " ".join(head.split())))
    if SCOPE_HEAD.search(head):
        return "scope"
    if TYPE_HEAD.search(head):
        return "type"
    paren = first_top_level_paren(head)
    # A brace inside an argument list (`T x = {}` as a default) or after an `=` initializes.
    if paren < 0 or open_parens(head) > 0 or top_level_assignment(head):
        return "other"
    # In a constructor's initializer list, `x_{a}` is a member's brace initializer.
    rest = head[matching_paren(head, paren) + 1:]
    if re.search(r"(?<!:):(?!:)", rest) and re.search(r"[\w>]\s*$", rest):
        return "other"
    return "function"


def function_name(head):
    paren = first_top_level_paren(head)
    before = " ".join(head[:paren].split())
    m = NAME_BEFORE_PAREN.search(before)
    name = m.group(1).strip() if m else before
    return name.split()[-1] if name.split() else "?"


def scan_functions(code):
    """Yields (name, first_line, last_line) for every function body at namespace or class
    scope. `code` is the blanked text (see blank_code)."""
    stack = []  # kinds of the open braces
    head_start = 0  # offset where the current declaration's text starts
    open_function = None  # (name, first line, depth) of the function being read
    line = 1
    for k, ch in enumerate(code):
        if ch == "\n":
            line += 1
            continue
        if open_function:
            if ch == "{":
                stack.append("inner")
            elif ch == "}":
                stack.pop()
                if len(stack) == open_function[2]:
                    yield open_function[0], open_function[1], line
                    open_function = None
                    head_start = k + 1
            continue
        if ch == ";":
            head_start = k + 1
        elif ch == "{":
            head = code[head_start:k]
            kind = classify(head)
            if kind == "function":
                paren = head_start + first_top_level_paren(head)
                first = line - code[paren:k].count("\n")
                open_function = (function_name(head), first, len(stack))
                stack.append("function")
            else:
                stack.append(kind)
                if kind != "other":
                    head_start = k + 1
        elif ch == "}":
            kind = stack.pop() if stack else "scope"
            if kind != "other":
                head_start = k + 1


def check_file(path, max_file, max_function):
    text = path.read_text(encoding="utf-8", errors="replace")
    problems = []
    lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    if lines > max_file:
        problems.append(f"{path}: {lines} lines (limit {max_file})")
    for name, first, last in scan_functions(blank_code(text)):
        length = last - first + 1
        if length > max_function:
            problems.append(f"{path}:{first}: function {name} is {length} lines (limit {max_function})")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="*", type=Path)
    parser.add_argument("--max-file-lines", type=int, default=400)
    parser.add_argument("--max-function-lines", type=int, default=80)
    args = parser.parse_args()
    root = Path(__file__).resolve().parent.parent
    dirs = args.dirs or [root / "src", root / "bench"]
    problems = []
    for d in dirs:
        if not d.exists():
            print(f"check_layout: {d}: no such file or folder", file=sys.stderr)
            return 2
        files = [d] if d.is_file() else sorted(p for p in d.rglob("*") if p.suffix in SUFFIXES)
        for path in files:
            problems += check_file(path, args.max_file_lines, args.max_function_lines)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
