#!/usr/bin/env python3
"""Runs the bad-input corpus (cases.txt) against the gpuledger binary.

Each case is a command line a hostile or careless user could type. It passes
when the binary exits with the expected status, its output (stdout and stderr
together) holds the expected fragment, no sanitizer report appears, no
temporary report file (*.tmp.<pid>) is left behind, and it finishes within
the time limit (and, outside sanitizer builds, within the memory limit).

cases.txt holds two kinds of lines ('#' starts a comment):
  file NAME = CONTENT       a file the cases use, written to the scratch folder
                            as @T/NAME (CONTENT takes Python escapes: \\n, \\x1b)
  case EXIT | FRAGMENT | ARGS
                            ARGS is split as a shell would (shlex); @T is the
                            scratch folder, @ESC the escape character (0x1b).
The runner also makes, in the scratch folder: dir/ (a folder), fifo (a FIFO),
big.json (a sparse file of 2 GiB), file (a regular file), link-to-missing (a
dangling symlink), ro/ (a folder with no write permission).

Usage: run_bad_inputs.py --bin GPULEDGER --cases cases.txt [--jobs N]
                         [--timeout S] [--no-memory-limit] [--filter TEXT]
"""
import argparse
import concurrent.futures
import os
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

SANITIZER_MARKS = ("runtime error:", "ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "UndefinedBehaviorSanitizer")
MEMORY_LIMIT_BYTES = 1 << 30


def parse_cases(path):
    files, cases = {}, []
    with open(path, encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            line = raw.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if line.startswith("file "):
                name, _, content = line[5:].partition(" = ")
                files[name.strip()] = content.encode("latin-1", "backslashreplace").decode("unicode_escape")
                continue
            if not line.startswith("case "):
                sys.exit(f"{path}:{n}: a line is 'file NAME = CONTENT' or 'case EXIT | FRAGMENT | ARGS'")
            parts = line[5:].split(" | ", 2)
            if len(parts) != 3:
                sys.exit(f"{path}:{n}: expected 'case EXIT | FRAGMENT | ARGS'")
            cases.append({"line": n, "exit": int(parts[0]), "fragment": parts[1].strip(), "args": parts[2].strip()})
    return files, cases


def make_scratch(root, files):
    for name, content in files.items():
        with open(os.path.join(root, name), "w", encoding="utf-8", newline="") as f:
            f.write(content)
    os.mkdir(os.path.join(root, "dir"))
    os.mkfifo(os.path.join(root, "fifo"))
    with open(os.path.join(root, "big.json"), "wb") as f:
        f.truncate(2 << 30)  # sparse: takes no disk
    with open(os.path.join(root, "file"), "w") as f:
        f.write("not a folder\n")
    os.symlink(os.path.join(root, "missing-target"), os.path.join(root, "link-to-missing"))
    ro = os.path.join(root, "ro")
    os.mkdir(ro)
    os.chmod(ro, 0o555)


def limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))


def run_case(case, binary, scratch, timeout, memory_limit):
    args = case["args"].replace("@T", scratch)
    argv = [binary] + [a.replace("@ESC", "\x1b") for a in shlex.split(args)]
    work = tempfile.mkdtemp(prefix="case-", dir=scratch)
    t0 = time.monotonic()
    try:
        p = subprocess.run(argv, cwd=work, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout,
                           preexec_fn=limit_memory if memory_limit else None)
        out = p.stdout.decode("utf-8", "replace") + p.stderr.decode("utf-8", "replace")
        rc = p.returncode
    except subprocess.TimeoutExpired:
        return case, f"timed out after {timeout} s", time.monotonic() - t0
    seconds = time.monotonic() - t0
    problems = []
    if rc != case["exit"]:
        problems.append(f"exit {rc}, expected {case['exit']}")
    if case["fragment"] not in out:
        problems.append(f"output lacks {case['fragment']!r}")
    for mark in SANITIZER_MARKS:
        if mark in out:
            problems.append(f"sanitizer report ({mark})")
    left = [os.path.join(d, f) for d, _, fs in os.walk(work) for f in fs if ".tmp." in f]
    if left:
        problems.append(f"temporary files left: {left}")
    shutil.rmtree(work, ignore_errors=True)
    if problems:
        tail = out[-600:].replace("\n", "\n    | ")
        return case, "; ".join(problems) + f"\n    | {tail}", seconds
    return case, None, seconds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--cases", required=True)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=20.0)
    ap.add_argument("--no-memory-limit", action="store_true", help="sanitizer builds reserve terabytes of address space")
    ap.add_argument("--filter", default="")
    o = ap.parse_args()
    o.bin = os.path.abspath(o.bin)
    files, cases = parse_cases(o.cases)
    if o.filter:
        cases = [c for c in cases if o.filter in c["args"]]
    scratch = tempfile.mkdtemp(prefix="gpl-bad-inputs-")
    failed = 0
    t0 = time.monotonic()
    try:
        make_scratch(scratch, files)
        with concurrent.futures.ThreadPoolExecutor(max_workers=o.jobs) as pool:
            futures = [pool.submit(run_case, c, o.bin, scratch, o.timeout, not o.no_memory_limit)
                       for c in cases]
            slowest = (0.0, None)
            for fut in futures:
                case, problem, seconds = fut.result()
                slowest = max(slowest, (seconds, case["line"]), key=lambda x: x[0])
                if problem:
                    failed += 1
                    print(f"FAIL cases.txt:{case['line']}: {case['args']}\n    {problem}")
        left = [os.path.join(d, f) for d, _, fs in os.walk(scratch) for f in fs if ".tmp." in f]
        if left:
            failed += 1
            print(f"FAIL temporary report files left in the scratch folder: {left}")
    finally:
        os.chmod(os.path.join(scratch, "ro"), 0o755) if os.path.isdir(os.path.join(scratch, "ro")) else None
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"bad inputs: {len(cases) - failed}/{len(cases)} passed in {time.monotonic() - t0:.1f} s "
          f"(slowest: cases.txt:{slowest[1]}, {slowest[0]:.1f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
