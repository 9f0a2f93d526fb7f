#!/usr/bin/env python3
"""The nightly workflow (.github/workflows/nightly.yml) is valid YAML, runs on a schedule on a
self-hosted runner, and every script it calls exists and is executable. Every path of the
repository it names (scripts, docs, results folders and files, in its steps or its comments)
exists in the tree, but for the GPU baselines (results/baselines/gpu/): while that folder is not
in the tree, the workflow must record it on the runner instead of gating — a step that finds it
missing, one that runs scripts/regress_nightly.sh --update on the gpu suite, one that uploads the
folder, and a gate that does not run that night. The finding step is run here with and without a
baseline in a scratch folder. Skips (77) without PyYAML."""
import os
import re
import subprocess
import sys
import tempfile

try:
    import yaml
except ImportError:
    print("PyYAML not installed: skipped")
    sys.exit(77)

GPU_BASELINES = "results/baselines/gpu"
# Top-level folders of the repository a workflow may name; a path must start at one of them and
# not continue another path ($BUILD_DIR/bench/gpuledger is a build output, not bench/).
REPO_PATH_RE = re.compile(
    r"(?<![\w./$-])((?:\.github|\.ci|scripts|results|docs|tests|bench|models|kernels|parallel|analytic|comm|core|cmake)"
    r"/[A-Za-z0-9_./-]*)")

root = sys.argv[1]
path = os.path.join(root, ".github", "workflows", "nightly.yml")
with open(path, encoding="utf-8") as f:
    text = f.read()
wf = yaml.safe_load(text)
# YAML 1.1 reads the key `on` as true; GitHub reads it as "on".
trigger = wf.get("on", wf.get(True))
errors = []
if not trigger or not trigger.get("schedule") or not trigger["schedule"][0].get("cron"):
    errors.append("no schedule with a cron line")
job = wf["jobs"]["gate"]
steps = job["steps"]
if "self-hosted" not in job["runs-on"]:
    errors.append(f"runs-on {job['runs-on']} is not self-hosted")
runs = "\n".join(step.get("run", "") for step in steps)
uses = [step.get("uses", "") for step in steps]
scripts = sorted(set(re.findall(r"scripts/[A-Za-z0-9_./-]+", runs)))
for s in scripts:
    full = os.path.join(root, s)
    if not os.path.isfile(full) or not os.access(full, os.X_OK):
        errors.append(f"{s} is called but is not an executable file")
for needed in ("scripts/build.sh", "scripts/regress_nightly.sh", "scripts/plot.py"):
    if needed not in scripts:
        errors.append(f"{needed} is called nowhere")
if not any(u.startswith("actions/upload-artifact") for u in uses):
    errors.append("nothing is uploaded")

# ---- every repository path it names ----
named = set()
for n, line in enumerate(text.split("\n"), 1):
    for m in REPO_PATH_RE.finditer(line):
        p = m.group(1).split("*")[0].rstrip(".,:;")
        named.add((p.rstrip("/"), n))
to_be_recorded = []
for p, n in sorted(named):
    if os.path.exists(os.path.join(root, p)):
        continue
    if p == GPU_BASELINES or p.startswith(GPU_BASELINES + "/"):
        to_be_recorded.append(p)
        continue
    errors.append(f"line {n}: {p} is named but is not in the tree")


# ---- the first GPU baseline, while it is not in the tree ----
def step_where(pred):
    return next((s for s in steps if pred(s)), None)


def nightly_calls(step):
    """The step's command lines (continuations joined; echo lines and comments left out) that run
    scripts/regress_nightly.sh."""
    joined = re.sub(r"\\\n\s*", " ", step.get("run", ""))
    return [line.strip() for line in joined.split("\n")
            if "scripts/regress_nightly.sh" in line and not re.match(r"\s*(echo|#)", line)]


def records(step):
    return any("--update" in c.split() and "SUITE=gpu" in c.split() for c in nightly_calls(step))


def gates(step):
    return any("--update" not in c.split() for c in nightly_calls(step))


if not os.path.isdir(os.path.join(root, GPU_BASELINES)):
    finder = step_where(lambda s: s.get("id") and GPU_BASELINES in s.get("run", "") and "GITHUB_OUTPUT" in s.get("run", ""))
    record = step_where(records)
    upload = step_where(lambda s: s.get("uses", "").startswith("actions/upload-artifact")
                        and GPU_BASELINES in str(s.get("with", {}).get("path", "")))
    gate = step_where(gates)
    if finder is None:
        errors.append(f"{GPU_BASELINES}/ is not in the tree and no step (with an id) finds it missing")
    if record is None:
        errors.append(f"{GPU_BASELINES}/ is not in the tree and no step records it (SUITE=gpu ... --update)")
    if gate is None:
        errors.append("no step runs the gate (scripts/regress_nightly.sh without --update)")
    if upload is None:
        errors.append(f"{GPU_BASELINES}/ is not in the tree and no step uploads it")
    if finder is not None and record is not None and upload is not None and gate is not None:
        ref = f"steps.{finder['id']}.outputs"
        conds = {name: str(s.get("if", "")) for name, s in (("record", record), ("upload", upload), ("gate", gate))}
        for name, cond in conds.items():
            if ref not in cond:
                errors.append(f"the {name} step does not depend on {ref} (if: {cond or 'none'})")
        if conds["record"] != conds["upload"] or conds["record"] == conds["gate"]:
            errors.append("the record and upload steps must run together, and not on the nights the gate runs")
        # Run the finding step as the runner would, in a scratch checkout without and with a baseline.
        for with_baseline in (False, True):
            with tempfile.TemporaryDirectory() as tmp:
                if with_baseline:
                    os.makedirs(os.path.join(tmp, GPU_BASELINES))
                    open(os.path.join(tmp, GPU_BASELINES, "point.json"), "w").close()
                out = os.path.join(tmp, "github_output")
                script = finder["run"].replace("${{ github.run_id }}", "0")
                subprocess.run(["bash", "-eo", "pipefail", "-c", script], cwd=tmp, check=True,
                               env=dict(os.environ, GITHUB_OUTPUT=out), stdout=subprocess.DEVNULL)
                with open(out, encoding="utf-8") as f:
                    outputs = dict(line.strip().split("=", 1) for line in f if "=" in line)
                mode = outputs.get("mode", "")
                ran = [name for name, cond in conds.items() if f"'{mode}'" in cond]
                want = ["gate"] if with_baseline else ["record", "upload"]
                if ran != want:
                    errors.append(f"{'with' if with_baseline else 'without'} a baseline the finding step says "
                                  f"mode={mode!r}, which runs {ran or 'nothing'}, not {want}")

if errors:
    print("\n".join(f"{path}: {e}" for e in errors))
    sys.exit(1)
extra = f"; {GPU_BASELINES}/ to be recorded on the runner" if to_be_recorded else ""
print(f"{path}: ok ({len(steps)} steps; calls {', '.join(scripts)}; names {len(named)} repository paths{extra})")
