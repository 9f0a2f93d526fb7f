#!/usr/bin/env python3
"""The gate's three injections on a real train report, without timing: a report passes against
itself; a 10% lower median MFU, a changed loss and one more KiB on one account each fail (exit 1),
naming what changed, and regress --json's status agrees with the exit status.

The baseline's repetitions are replaced by fixed figures with a 1% spread, so that whether the 10%
drop is caught does not depend on how noisy this machine was when the report was made."""
import json
import os
import shutil

from gate_common import GPULEDGER, SOURCE, expect_in, run, scratch

d = scratch("inject")
base = os.path.join(d, "base.json")
run([GPULEDGER, "train", "--model", "tiny-gpt", "--seq", "32", "--steps", "2", "--warmup", "0", "--repeat", "4",
     "--repeat-warmup", "1", "--quiet", "--json", base], expect=0)
with open(base, encoding="utf-8") as f:
    doc = json.load(f)
# The warm-up run is left out; every reported repetition took the one peak the first run measured.
assert len(doc["summary"]["repeats"]) == 4, doc["summary"]["repeats"]
assert doc["summary"]["peak_source"].endswith("(measured once, for every repetition)"), doc["summary"]["peak_source"]
assert sum(1 for c in doc["checks"] if c["name"] == "repeat.same_bytes_and_loss") == 3, doc["checks"]
for i, r in enumerate(doc["summary"]["repeats"]):
    r["mfu"] = 0.100 + 0.001 * (i % 2)
    r["tokens_per_s"] = 1000.0 + 10.0 * (i % 2)
with open(base, "w", encoding="utf-8") as f:
    json.dump(doc, f)


def gate(name, injection, needle):
    cur = os.path.join(d, f"{name}.json")
    shutil.copy(base, cur)
    if injection:
        run(["python3", os.path.join(SOURCE, "scripts", "regress_inject.py"), injection, cur], expect=0)
    verdict = os.path.join(d, f"{name}.regress.json")
    status, text = run([GPULEDGER, "regress", cur, "--baseline", base, "--json", verdict],
                       expect=1 if injection else 0)
    with open(verdict, encoding="utf-8") as f:
        result = json.load(f)
    want = "failed" if injection else "ok"
    if result["status"] != want:
        raise SystemExit(f"FAIL: {name}: regress --json status {result['status']!r} with exit {status}")
    if needle:
        expect_in(text, needle, name)
        assert len(result["regressions"]) >= 1, result
    print(f"ok: {name} (exit {status})")


gate("same", None, None)
gate("mfu", "mfu", "mfu: median 0.09045 vs baseline 0.1005 (-10.0%")
gate("loss", "loss", "loss at step 1:")
gate("bytes", "bytes", "peak_bytes.activations on rank 0:")
# Another configuration is not a regression but bad input: exit 2.
other = os.path.join(d, "other.json")
run([GPULEDGER, "train", "--model", "tiny-gpt", "--seq", "16", "--steps", "2", "--quiet", "--json", other], expect=0)
status, text = run([GPULEDGER, "regress", other, "--baseline", base], expect=2)
expect_in(text, "run.seq: report 16 vs baseline 32", "another configuration")
print("ok: another configuration (exit 2)")
