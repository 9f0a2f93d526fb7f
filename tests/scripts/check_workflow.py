#!/usr/bin/env python3
"""The nightly workflow (.github/workflows/nightly.yml) is valid YAML, runs on a schedule on a
self-hosted runner, and every script it calls exists and is executable. Skips (77) without PyYAML."""
import os
import re
import sys

try:
    import yaml
except ImportError:
    print("PyYAML not installed: skipped")
    sys.exit(77)

root = sys.argv[1]
path = os.path.join(root, ".github", "workflows", "nightly.yml")
with open(path, encoding="utf-8") as f:
    wf = yaml.safe_load(f)
# YAML 1.1 reads the key `on` as true; GitHub reads it as "on".
trigger = wf.get("on", wf.get(True))
errors = []
if not trigger or not trigger.get("schedule") or not trigger["schedule"][0].get("cron"):
    errors.append("no schedule with a cron line")
job = wf["jobs"]["gate"]
if "self-hosted" not in job["runs-on"]:
    errors.append(f"runs-on {job['runs-on']} is not self-hosted")
runs = "\n".join(step.get("run", "") for step in job["steps"])
uses = [step.get("uses", "") for step in job["steps"]]
scripts = sorted(set(re.findall(r"scripts/[A-Za-z0-9_./-]+", runs)))
for s in scripts:
    full = os.path.join(root, s)
    if not os.path.isfile(full) or not os.access(full, os.X_OK):
        errors.append(f"{s} is called but is not an executable file")
for needed in ("scripts/build.sh", "scripts/regress_nightly.sh", "scripts/plot.py"):
    if needed not in scripts:
        errors.append(f"{needed} is not called")
if not any(u.startswith("actions/upload-artifact") for u in uses):
    errors.append("nothing is uploaded")
if errors:
    print("\n".join(f"{path}: {e}" for e in errors))
    sys.exit(1)
print(f"{path}: ok ({len(job['steps'])} steps; calls {', '.join(scripts)})")
