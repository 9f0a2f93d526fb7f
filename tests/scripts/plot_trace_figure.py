#!/usr/bin/env python3
"""scripts/plot_trace.py draws a simulated two-stage trace (train --backend meta --trace on the h100-sxm
profiles) as a PNG with a lane per stage and stream, and refuses a trace without slices. Skips (77)
without matplotlib for /usr/bin/python3."""
import json
import os
import subprocess

from gate_common import GPULEDGER, SOURCE, run, scratch

PY = "/usr/bin/python3"
if subprocess.run([PY, "-c", "import matplotlib"], capture_output=True).returncode != 0:
    print("no matplotlib for /usr/bin/python3: skipped")
    raise SystemExit(77)
plot = os.path.join(SOURCE, "scripts", "plot_trace.py")
d = scratch("plot_trace")
trace = os.path.join(d, "predicted.json")
run([GPULEDGER, "train", "--model", "tiny-llama", "--backend", "meta", "--pp", "2", "--seq", "32", "--mbs", "2",
     "--microbatches", "4", "--device", "h100-sxm", "--steps", "1", "--warmup", "0", "--quiet", "--trace", trace],
    expect=0)
png = os.path.join(d, "predicted.png")
_, out = run([PY, plot, trace, "--out", png], expect=0)
with open(png, "rb") as f:
    if f.read(4)[1:] != b"PNG" or os.path.getsize(png) < 2000:
        raise SystemExit(f"FAIL: {png} is not a drawn PNG")
if "on 4 lanes" not in out:
    raise SystemExit(f"FAIL: expected 4 lanes (2 stages x compute, comm pp): {out}")
empty = os.path.join(d, "empty.json")
with open(empty, "w", encoding="utf-8") as f:
    json.dump({"traceEvents": []}, f)
run([PY, plot, empty, "--out", os.path.join(d, "empty.png")], expect=1)
print("ok: plot_trace")
