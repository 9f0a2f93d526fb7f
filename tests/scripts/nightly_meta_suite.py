#!/usr/bin/env python3
"""scripts/regress_nightly.sh on its meta suite (the bytes-only point, no timing): baselines
recorded, two nights in a row pass, and a changed loss and one more KiB on one account each fail
it (exit 1) naming the point and what changed; the history gets one line per gated night."""
import json
import os

from gate_common import GPULEDGER, SOURCE, expect_in, run, scratch

out = scratch("nightly")
env = {"GPULEDGER": GPULEDGER, "SUITE": "meta", "BASELINES": os.path.join(out, "baselines"), "PLOT": "0"}
script = os.path.join(SOURCE, "scripts", "regress_nightly.sh")
run([script, out, "--update"], env, expect=0)
for night in (1, 2):
    status, text = run([script, out], env, expect=0)
    expect_in(text, "nightly ok", f"night {night}")
for injection, needle in (("loss", "train-llama2-7b-meta: 1 regression(s): loss at step 0"),
                          ("bytes", "peak_bytes.activations on rank 0")):
    status, text = run([script, out], {**env, "NIGHTLY_INJECT": injection}, expect=1)
    expect_in(text, "NIGHTLY FAILED", injection)
    expect_in(text, needle, injection)
    print(f"ok: {injection} fails the night")
with open(os.path.join(out, "history.jsonl"), encoding="utf-8") as f:
    lines = [json.loads(line) for line in f]
assert [line["status"] for line in lines] == ["ok", "ok", "failed", "failed"], lines
assert lines[0]["point"] == "train-llama2-7b-meta" and lines[0]["fingerprint"]["cpu_model"], lines[0]
print("ok: history has 4 lines")
