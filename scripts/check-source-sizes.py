#!/usr/bin/env python3
"""Checks the size limits of docs/CONTRIBUTING.md on the library's sources: no file in src/
over MAX_FILE lines, no function body over MAX_FUNCTION lines.

A function is a brace block opened at namespace or class level by a line that looks like a
definition (ends with ')' plus qualifiers, or a constructor's initializer list). Comments,
strings and preprocessor lines are skipped when braces are counted.
Usage: check-source-sizes.py [ROOT]   (ROOT defaults to the repository); exit status 1 when a
limit is broken, with one line per finding.
"""
import pathlib
import re
import sys

MAX_FILE = 600
MAX_FUNCTION = 80
SUFFIXES = {".cc", ".h", ".cu", ".cuh"}


def strip_code(line, in_comment):
    """The line without comments and string/char literals; whether a /* */ continues."""
    out = []
    i = 0
    while i < len(line):
        if in_comment:
            end = line.find("*/", i)
            if end < 0:
                return "".join(out), True
            i = end + 2
            in_comment = False
        elif line.startswith("//", i):
            break
        elif line.startswith("/*", i):
            in_comment = True
            i += 2
        elif line[i] in "\"'":
            quote = line[i]
            i += 1
            while i < len(line) and line[i] != quote:
                i += 2 if line[i] == "\\" else 1
            i += 1
        else:
            out.append(line[i])
            i += 1
    return "".join(out), in_comment


HEAD = re.compile(r"(\)\s*(const|override|final|noexcept|mutable|\s)*(->\s*[\w:<>*& ]+)?\s*\{\s*$)|(^\s*:\s*\w.*\{\s*$)|(\)\s*\{\s*$)")
NOT_FUNCTION = re.compile(r"^\s*(if|for|while|switch|catch|do|else|return)\b|\bnamespace\b|\b(struct|class|enum|union)\b[^(]*\{\s*$|=\s*\{?\s*$|\[[^\]]*\]\s*\([^)]*\)\s*(mutable\s*)?\{")


def functions(lines):
    """Yields (first line number, length, head) of each function body."""
    depth = 0
    in_comment = False
    scopes = []  # depth at which each open block started, and whether it is a function
    for number, raw in enumerate(lines, 1):
        if raw.lstrip().startswith("#"):
            continue
        code, in_comment = strip_code(raw, in_comment)
        for ch in code:
            if ch == "{":
                inside_function = any(is_fn for _, is_fn, _ in scopes)
                is_fn = (not inside_function and HEAD.search(code) is not None
                         and NOT_FUNCTION.search(code) is None)
                scopes.append((number, is_fn, raw.strip()))
                depth += 1
            elif ch == "}":
                depth -= 1
                if scopes:
                    start, is_fn, head = scopes.pop()
                    if is_fn:
                        yield start, number - start - 1, head


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
    findings = []
    for path in sorted((root / "src").rglob("*")):
        if path.suffix not in SUFFIXES:
            continue
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        rel = path.relative_to(root)
        if len(lines) > MAX_FILE:
            findings.append(f"{rel}: {len(lines)} lines (limit {MAX_FILE})")
        for start, length, head in functions(lines):
            if length > MAX_FUNCTION:
                findings.append(f"{rel}:{start}: function of {length} lines (limit {MAX_FUNCTION}): {head[:70]}")
    for f in findings:
        print(f)
    print(f"check-source-sizes: {len(findings)} finding(s)")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
