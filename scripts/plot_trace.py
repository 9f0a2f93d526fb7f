#!/usr/bin/python3
"""Draws a Chrome trace written by gpuledger (`train --trace`, measured or predicted) as a timeline PNG.

    /usr/bin/python3 scripts/plot_trace.py measured.json --out measured.png [--title T] [--width 10]

One lane per process × thread (a rank or simulated stage, and its streams: compute, comm tp, comm
dp, comm pp, …), in the trace's process order; each complete slice ("ph": "X") a bar coloured by
kind: GEMMs, attention (flash attention, softmax and the attention core), other compute, and one
colour per communication group (the slice's category, "comm <group>"). The time axis is in ms from
the earliest slice. Reads only the trace format `core/trace.h` writes. Headless (Agg); needs
matplotlib for /usr/bin/python3.
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

COMPUTE = {"gemm": ("GEMM", "#4878cf"), "attention": ("attention", "#d65f5f"), "other": ("other compute", "#a0a0a0")}
COMM = ["#6acc65", "#ee854a", "#b47cc7", "#c4ad66", "#77bedb", "#8c613c"]
ATTENTION_PREFIXES = ("attention", "flash", "softmax", "ring_attention")


def kind(ev):
    """(label, colour key) of a slice: a compute kind, or its communication group's category."""
    cat = ev.get("cat", "compute")
    if cat != "compute":
        return cat
    name = ev.get("name", "")
    if name.startswith("gemm") or name in ("matmul", "linear"):
        return "gemm"
    if name.startswith(ATTENTION_PREFIXES):
        return "attention"
    return "other"


def load(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    pname, psort, tname = {}, {}, {}
    slices = []
    for e in events:
        ph = e.get("ph")
        if ph == "M":
            if e["name"] == "process_name":
                pname[e["pid"]] = e["args"]["name"]
            elif e["name"] == "process_sort_index":
                psort[e["pid"]] = e["args"]["sort_index"]
            elif e["name"] == "thread_name":
                tname[(e["pid"], e["tid"])] = e["args"]["name"]
        elif ph == "X":
            slices.append(e)
    what = doc.get("otherData", {}).get("what", "") if isinstance(doc, dict) else ""
    return slices, pname, psort, tname, what


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", help="a Chrome trace JSON written by gpuledger")
    ap.add_argument("--out", required=True, help="the PNG to write")
    ap.add_argument("--title", help="the figure's title (default: the trace's otherData.what)")
    ap.add_argument("--width", type=float, default=10.0, help="figure width in inches")
    ap.add_argument("--dpi", type=int, default=100)
    a = ap.parse_args()
    slices, pname, psort, tname, what = load(a.trace)
    if not slices:
        print(f"plot_trace: {a.trace} has no complete slices", file=sys.stderr)
        return 1
    t0 = min(e["ts"] for e in slices)
    lanes = sorted({(e["pid"], e.get("tid", 0)) for e in slices}, key=lambda pt: (psort.get(pt[0], pt[0]), pt[1]))
    row = {pt: i for i, pt in enumerate(lanes)}
    comm_cats = sorted({kind(e) for e in slices} - set(COMPUTE))
    colour = {k: c for k, (_, c) in COMPUTE.items()}
    colour.update({c: COMM[i % len(COMM)] for i, c in enumerate(comm_cats)})
    by_kind = {}
    for e in slices:
        bar = ((e["ts"] - t0) / 1e3, max(e.get("dur", 0) / 1e3, 0))
        by_kind.setdefault(kind(e), []).append((bar, row[(e["pid"], e.get("tid", 0))]))
    fig, ax = plt.subplots(figsize=(a.width, 0.9 + 0.42 * len(lanes)))
    for k, items in by_kind.items():
        for r in range(len(lanes)):
            bars = [b for b, rr in items if rr == r]
            if bars:
                ax.broken_barh(bars, (r - 0.4, 0.8), facecolors=colour[k], edgecolor="none")
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels([f"{pname.get(p, f'pid {p}')} · {tname.get((p, t), f'tid {t}')}" for p, t in lanes],
                       fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("time (ms)")
    ax.set_xlim(0, max((e["ts"] - t0 + e.get("dur", 0)) / 1e3 for e in slices))
    ax.grid(axis="x", alpha=0.3)
    present = [k for k in list(COMPUTE) + comm_cats if k in by_kind]
    ax.legend(handles=[Patch(color=colour[k], label=COMPUTE[k][0] if k in COMPUTE else k) for k in present],
              loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=len(present), fontsize=8, frameon=False)
    ax.set_title(a.title or what, fontsize=9, loc="left", pad=16)
    fig.tight_layout()
    fig.savefig(a.out, dpi=a.dpi)
    print(f"plot_trace: {len(slices)} slices on {len(lanes)} lanes -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
