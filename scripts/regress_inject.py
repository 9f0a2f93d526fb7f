#!/usr/bin/env python3
"""Test hook of the regression gate: edits copies of gpuledger train reports the way a regression
would change them, so that `gpuledger regress` and scripts/regress_nightly.sh can be shown to catch
it without waiting for a real one (docs/regress.md "Showing that the gate works").

    regress_inject.py mfu   REPORT [OUT]   MFU and tokens/s 10% lower (every repetition, so the median)
    regress_inject.py loss  REPORT [OUT]   the last step's loss 2% higher
    regress_inject.py bytes REPORT [OUT]   one more KiB on rank 0's activations account (its peak too)

OUT defaults to REPORT (edited in place). Prints what it changed.
"""
import json
import sys


def inject(doc, what):
    s = doc["summary"]
    if what == "mfu":
        for r in s.get("repeats") or [s]:
            for k in ("mfu", "hfu", "tokens_per_s"):
                if r.get(k) is not None:
                    r[k] *= 0.9
            if r.get("median_step_ms"):
                r["median_step_ms"] /= 0.9
        for k in ("mfu", "hfu", "tokens_per_s"):
            if s.get(k) is not None and "repeats" in s:
                s[k] *= 0.9
        return "MFU and tokens/s of every repetition x 0.9"
    if what == "loss":
        s["loss"][-1] = s["loss"][-1] * 1.02 + (0.02 if s["loss"][-1] == 0 else 0)
        return f"loss at step {len(s['loss']) - 1} -> {s['loss'][-1]}"
    if what == "bytes":
        m = doc["ranks"][0]["measured"]
        m["peak_by_account"]["activations"] += 1024
        m["peak_bytes"] += 1024
        return "rank 0 activations + 1024 bytes"
    raise SystemExit(f"regress_inject.py: unknown injection {what!r} (mfu, loss, bytes)")


def main(argv):
    if len(argv) not in (2, 3):
        raise SystemExit(__doc__)
    what, path = argv[0], argv[1]
    out = argv[2] if len(argv) == 3 else path
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    change = inject(doc, what)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)
    print(f"injected into {out}: {change}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
