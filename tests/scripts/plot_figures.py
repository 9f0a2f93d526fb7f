#!/usr/bin/env python3
"""scripts/plot.py draws every figure it promises: from a real two-stage train report with a
timeline (per-rank bars, the step's memory timeline, memory, MFU), from a synthetic sweep with
recompute pairs and failed points (the recompute trade-off, the faceted MFU heatmap), and from a
history file. Skips (77) without matplotlib for /usr/bin/python3."""
import itertools
import json
import os
import subprocess

from gate_common import GPULEDGER, SOURCE, run, scratch

PY = "/usr/bin/python3"
if subprocess.run([PY, "-c", "import matplotlib"], capture_output=True).returncode != 0:
    print("no matplotlib for /usr/bin/python3: skipped")
    raise SystemExit(77)
plot = os.path.join(SOURCE, "scripts", "plot.py")
d = scratch("plots")


def expect_pngs(folder, names):
    for n in names:
        path = os.path.join(folder, n)
        with open(path, "rb") as f:
            if f.read(4)[1:] != b"PNG" or os.path.getsize(path) < 2000:
                raise SystemExit(f"FAIL: {path} is not a drawn PNG")
    print(f"ok: {', '.join(names)}")


report = os.path.join(d, "pp2.json")
run([GPULEDGER, "train", "--model", "tiny-llama", "--backend", "meta", "--pp", "2", "--world", "2", "--seq", "32",
     "--steps", "1", "--warmup", "0", "--timeline", "--quiet", "--json", report], expect=0)
run([PY, plot, report, "--out", os.path.join(d, "r")], expect=0)
expect_pngs(os.path.join(d, "r"), ["train_memory.png", "train_mfu.png", "pp2_ranks.png", "pp2_timeline.png"])

# A synthetic sweep: 2 layouts x 2 ZeRO x 3 recompute modes, one point out of memory, one in error.
sweep = os.path.join(d, "sweep")
os.makedirs(sweep)
points = []
for i, (tp, zero, rc) in enumerate(itertools.product([1, 2], [0, 1], ["none", "selective", "full"])):
    name = f"tp{tp}_zero{zero}_recompute{rc}"
    status = "oom" if i == 0 else ("error" if i == 7 else "ok")
    slow = {"none": 1.0, "selective": 1.05, "full": 1.3}[rc]
    acc = {"weights": 4e9 / tp, "grads": 4e9 / tp, "optim": 8e9 / (2 if zero else 1),
           "activations": {"none": 6e9, "selective": 2e9, "full": 5e8}[rc] / tp}
    rank = {"rank": 0, "coords": {"pp": 0}, "analytic": {"exact": acc},
            "measured": {"peak_bytes": sum(acc.values()), "at_peak": acc, "peak_by_account": acc}}
    doc = {"schema": "gpuledger.report/1", "kind": "train", "status": status,
           "config": {"layout": {"dp": 2, "tp": tp, "pp": 1, "zero": zero}, "run": {"recompute": rc},
                      "model": {"name": "m"}, "memory_limit_bytes": 20e9},
           "summary": {"mfu": 0.4 / slow if status == "ok" else None, "hfu": 0.4 if status == "ok" else None,
                       "median_step_ms": 100 * slow},
           "ranks": [rank]}
    with open(os.path.join(sweep, name + ".json"), "w", encoding="utf-8") as f:
        json.dump(doc, f)
    points.append({"name": name, "values": {"tp": str(tp), "zero": str(zero), "recompute": rc},
                   "report": name + ".json", "status": status})
with open(os.path.join(sweep, "sweep.json"), "w", encoding="utf-8") as f:
    json.dump({"schema": "gpuledger.sweep/1", "kind": "train", "points": points}, f)
run([PY, plot, sweep], expect=0)
expect_pngs(sweep, ["train_memory.png", "train_mfu.png", "train_recompute.png"])

history = os.path.join(d, "history.jsonl")
with open(history, "w", encoding="utf-8") as f:
    for night, mfu in enumerate([0.30, 0.31, 0.27]):
        f.write(json.dumps({"when_utc": f"2026-11-0{night + 1}T02:17:00Z", "point": "p", "status":
                            "ok" if mfu > 0.28 else "failed",
                            "metrics": {"mfu": {"median": mfu}, "tokens_per_s": {"median": 1e4 * mfu}}}) + "\n")
run([PY, plot, "--history", history, "--out", os.path.join(d, "h")], expect=0)
expect_pngs(os.path.join(d, "h"), ["history.png"])
