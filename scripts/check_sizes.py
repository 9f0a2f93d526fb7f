#!/usr/bin/env python3
"""Size rules of the production code (docs/architecture.md "Size rules"):
no file in parallel/ or bench/ over 400 lines, no function anywhere in the
production folders over 100 lines (from its signature to its closing brace).

  check_sizes.py [ROOT]     exit 1 listing every file and function over its limit

A function is a brace block opened at namespace or class level by a line
that closes a parameter list; lambdas and nested blocks count toward the
function that holds them. Comments and string literals are skipped.
"""
import pathlib
import re
import sys

FILE_LIMIT, FUNCTION_LIMIT = 400, 100
FILE_FOLDERS = ("parallel", "bench")
CODE_FOLDERS = ("core", "kernels", "comm", "analytic", "perf", "models", "parallel", "bench")
SUFFIXES = {".h", ".cpp", ".cu", ".cuh"}
SIGNATURE = re.compile(r"\)\s*(const\s*)?(noexcept\s*)?(override\s*)?(final\s*)?(->[^{;]*)?(:[^;]*)?$")


def strip(text):
    """The text with comments and string/char literals blanked (lines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    """(name line, first line, length) of each function body in the file."""
    lines = strip(path.read_text(errors="replace")).split("\n")
    stack, found, pending = [], [], ""   # stack: per open brace, (kind, start line)
    for number, line in enumerate(lines, 1):
        for k, ch in enumerate(line):
            if ch == "{":
                head = (pending + " " + line[:k]).strip()
                in_function = any(kind == "function" for kind, _ in stack)
                is_function = not in_function and SIGNATURE.search(head) and not re.search(
                    r"\b(if|for|while|switch|catch|namespace|class|struct|enum|union)\b[^)]*$", head)
                start = number
                if is_function and not line[:k].strip():      # "{" on its own line: the signature is above
                    start = number - 1
                stack.append(("function" if is_function else "block", start))
                pending = ""
            elif ch == "}":
                if stack:
                    kind, start = stack.pop()
                    if kind == "function":
                        found.append((start, number - start + 1))
                pending = ""
            elif ch == ";":
                pending = ""
        rest = line.rsplit("{", 1)[-1].rsplit("}", 1)[-1].rsplit(";", 1)[-1]
        pending = (pending + " " + rest).strip()[-400:]
    return found


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
    problems = []
    for folder in CODE_FOLDERS:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in SUFFIXES or "micro" in path.parts:
                continue
            rel = path.relative_to(root)
            count = path.read_text(errors="replace").count("\n")
            if folder in FILE_FOLDERS and count > FILE_LIMIT:
                problems.append(f"{rel}: {count} lines (limit {FILE_LIMIT})")
            for start, length in functions(path):
                if length > FUNCTION_LIMIT:
                    problems.append(f"{rel}:{start}: a function of {length} lines (limit {FUNCTION_LIMIT})")
    for p in problems:
        print(p)
    print(f"check_sizes: {len(problems)} over the limits")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
