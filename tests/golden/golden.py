#!/usr/bin/env python3
"""Golden reports: each line of plan_commands.txt run with --json, compared
with the recorded report in reports/<line number>.json.

What is compared: the whole report except what names the build or the host
(tool, env.host, env.hosts, env.when_utc, env.job_id, env.fingerprint) — the exact budgets, the published rows, the analytic
communication, the FLOPs and the checks. A restructuring of the code must leave
every byte of these unchanged; a change that is meant to move a figure
re-records them (--update) and the diff of reports/ shows what moved.

  golden.py GPULEDGER_BINARY            compare (exit 1 naming each difference)
  golden.py GPULEDGER_BINARY --update   record
"""
import json
import pathlib
import shlex
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
VOLATILE = [("tool",), ("env", "host"), ("env", "hosts"), ("env", "when_utc"), ("env", "job_id"), ("env", "fingerprint")]


def commands():
    for number, line in enumerate((HERE / "plan_commands.txt").read_text().splitlines(), 1):
        line = line.strip()
        if line and not line.startswith("#"):
            yield number, shlex.split(line)


def report(binary, args):
    out = subprocess.run([binary, *args, "--json", "-"], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise SystemExit(f"golden: `gpuledger {shlex.join(args)}` exited {out.returncode}:\n{out.stderr}")
    data = json.loads(out.stdout)
    for path in VOLATILE:
        node = data
        for key in path[:-1]:
            node = node.get(key, {})
        node.pop(path[-1], None)
    return data


def differences(want, got, where="$"):
    if type(want) is not type(got):
        return [f"{where}: {want!r} -> {got!r}"]
    if isinstance(want, dict):
        out = []
        for k in sorted(set(want) | set(got)):
            if k not in got:
                out.append(f"{where}.{k}: removed")
            elif k not in want:
                out.append(f"{where}.{k}: added ({got[k]!r})"[:300])
            else:
                out += differences(want[k], got[k], f"{where}.{k}")
        return out
    if isinstance(want, list):
        if len(want) != len(got):
            return [f"{where}: {len(want)} entries -> {len(got)}"]
        return [d for i, (a, b) in enumerate(zip(want, got)) for d in differences(a, b, f"{where}[{i}]")]
    return [] if want == got else [f"{where}: {want!r} -> {got!r}"]


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    binary, update = sys.argv[1], "--update" in sys.argv[2:]
    folder = HERE / "reports"
    folder.mkdir(exist_ok=True)
    failed = 0
    for number, args in commands():
        path = folder / f"{number:02d}.json"
        got = report(binary, args)
        if update:
            path.write_text(json.dumps({"command": args, "report": got}, indent=1, sort_keys=True) + "\n")
            continue
        if not path.exists():
            print(f"line {number}: no recorded report ({path.name}); run with --update")
            failed += 1
            continue
        recorded = json.loads(path.read_text())
        diffs = differences(recorded["command"], args, "command") + differences(recorded["report"], got)
        if diffs:
            failed += 1
            print(f"line {number} (gpuledger {shlex.join(args)}): {len(diffs)} difference(s)")
            for d in diffs[:20]:
                print("  " + d)
    total = sum(1 for _ in commands())
    print(f"golden: {total - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
