#!/usr/bin/python3
"""Plots gpuledger reports: a sweep folder (its sweep.json index) or report files.

    /usr/bin/python3 scripts/plot.py results/sweep-70b            # a `gpuledger sweep` folder
    /usr/bin/python3 scripts/plot.py a.json b.json --out plots/   # reports, one bar per file

What it draws, one PNG per figure (next to the input, or in --out):
  <kind>_memory.png   plan and train: stacked bars of bytes by account for each point's busiest
                      rank -- the exact analytic budget ("budget", hatched) and, for train, the
                      measured breakdown at the rank's peak ("measured") beside it; the device
                      memory as a dashed line when the report has one.
  train_mfu.png       train: MFU and HFU per point (points without a known peak are marked n/a).
  kv_capacity.png     kv: concurrent sequences that fit (capacity) and KV bytes per token.
  infer_capacity.png  infer: capacity measured by filling the pool beside the kv prediction.
Failed points (oom, error) keep their slot and are labelled with their status.

Reads only the report schema (docs/report.md) and the sweep index (docs/sweep.md). Headless (Agg).
Needs matplotlib: Debian's python3-matplotlib through /usr/bin/python3 (scripts/setup.sh).
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

ACCOUNTS = ["weights", "grads", "master", "optim", "activations", "kv", "comm", "workspace"]
GIB = float(1 << 30)


# ---- loading ----

def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def load_points(inputs):
    """[(name, report or None, status)] in input order, and the folder to write next to."""
    points = []
    out_dir = None
    for item in inputs:
        index_path = os.path.join(item, "sweep.json") if os.path.isdir(item) else item
        doc = load_json(index_path)
        base = os.path.dirname(os.path.abspath(index_path))
        out_dir = out_dir or base
        if doc.get("schema", "").startswith("gpuledger.sweep/"):
            for p in doc["points"]:
                path = os.path.join(base, p["report"])
                report = load_json(path) if os.path.exists(path) else None
                points.append((p["name"], report, p.get("status", "error")))
        elif doc.get("schema", "").startswith("gpuledger.report/"):
            name = os.path.splitext(os.path.basename(index_path))[0]
            points.append((name, doc, doc.get("status", "error")))
        else:
            raise SystemExit(f"plot.py: {index_path}: neither a sweep index nor a gpuledger report")
    return points, out_dir


# ---- per-point figures read from a report ----

def busiest_rank(report, measured):
    """The rank with the largest measured peak (train) or exact budget (plan)."""
    best, best_bytes = None, -1
    for r in report.get("ranks", []):
        if measured:
            b = r.get("measured", {}).get("peak_bytes")
        else:
            b = r.get("analytic", {}).get("exact", {}).get("total")
        if b is not None and b > best_bytes:
            best, best_bytes = r, b
    return best


def accounts_of(d):
    return [float(d.get(a, 0) or 0) for a in ACCOUNTS]


def summary(report, key):
    return (report or {}).get("summary", {}).get(key)


# ---- drawing ----

def label_failures(ax, xs, points, ymax):
    for x, (_, _, status) in zip(xs, points):
        if status != "ok":
            ax.text(x, ymax * 0.02, status, rotation=90, ha="center", va="bottom", color="firebrick")


def finish(fig, ax, names, path, written):
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=45 if len(names) > 4 else 0, ha="right" if len(names) > 4 else "center")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)


def byte_unit(max_bytes):
    """The binary unit that keeps the axis readable: (divisor, name)."""
    for div, name in ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if max_bytes >= div:
            return float(div), name
    return 1.0, "B"


def plot_memory(kind, points, out_dir, written):
    measured = kind in ("train", "infer")
    # (x, bar offset, account bytes, hatched) per bar, then one scale for all of them.
    bars, device_bytes = [], None
    width = 0.38 if measured else 0.6
    for x, (_, report, _) in enumerate(points):
        if not report:
            continue
        rank = busiest_rank(report, measured) or busiest_rank(report, False)
        if not rank:
            continue
        budget = rank.get("analytic", {}).get("exact", {})
        bars.append((x - width / 2 if measured else x, accounts_of(budget), True))
        if measured and "measured" in rank:
            bars.append((x + width / 2, accounts_of(rank["measured"].get("at_peak", {})), False))
        device_bytes = device_bytes or rank.get("device_bytes") or report.get("config", {}).get("memory_limit_bytes")
    top = max([sum(b[1]) for b in bars] + [device_bytes or 0, 1])
    div, unit = byte_unit(top)

    fig, ax = plt.subplots(figsize=(max(7, 0.9 * len(points) + 4), 5))
    colors = plt.get_cmap("tab10").colors
    labelled = set()
    for pos, values, hatched in bars:
        bottom = 0.0
        for i, v in enumerate(values):
            if v <= 0:
                continue
            label = ACCOUNTS[i] if ACCOUNTS[i] not in labelled else None
            labelled.add(ACCOUNTS[i])
            ax.bar(pos, v / div, width, bottom=bottom, color=colors[i % len(colors)], hatch="//" if hatched else None,
                   edgecolor="white", linewidth=0.3, label=label)
            bottom += v / div
    if device_bytes:
        ax.axhline(device_bytes / div, color="black", linestyle="--", linewidth=1,
                   label=f"device {device_bytes / div:.1f} {unit}")
    if measured:
        ax.bar(0, 0, 0, color="lightgray", hatch="//", edgecolor="white", label="budget (exact)")
        ax.bar(0, 0, 0, color="lightgray", label="measured at peak")
    label_failures(ax, range(len(points)), points, top / div)
    ax.set_ylabel(f"{unit} on the busiest rank")
    ax.set_title(f"{kind}: bytes by account" + (", budget (hatched) beside measured" if measured else ", exact budget"))
    handles, labels = ax.get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda i: ACCOUNTS.index(labels[i]) if labels[i] in ACCOUNTS else 99)
    ax.legend([handles[i] for i in order], [labels[i] for i in order], fontsize=8, loc="upper left",
              bbox_to_anchor=(1.01, 1.0))
    finish(fig, ax, [p[0] for p in points], os.path.join(out_dir, f"{kind}_memory.png"), written)


def plot_mfu(points, out_dir, written):
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(points) + 3), 4))
    width = 0.38
    ymax = 1e-9
    for x, (_, report, _) in enumerate(points):
        mfu, hfu = summary(report, "mfu"), summary(report, "hfu")
        if mfu is None:
            if report:
                ax.text(x, 0, "n/a", ha="center", va="bottom")
            continue
        ax.bar(x - width / 2, 100 * mfu, width, color="tab:blue", label="MFU" if x == 0 else None)
        if hfu is not None:
            ax.bar(x + width / 2, 100 * hfu, width, color="tab:orange", label="HFU" if x == 0 else None)
        ymax = max(ymax, 100 * mfu, 100 * (hfu or 0))
    label_failures(ax, range(len(points)), points, ymax)
    ax.set_ylabel("% of peak FLOP/s")
    ax.set_title("train: MFU (model FLOPs) and HFU (executed FLOPs)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    finish(fig, ax, [p[0] for p in points], os.path.join(out_dir, "train_mfu.png"), written)


def plot_capacity(kind, points, out_dir, written):
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(max(8, 1.6 * len(points) + 4), 4))
    ymax = 1e-9
    for x, (_, report, _) in enumerate(points):
        cap = summary(report, "capacity_sequences")
        if kind == "infer":
            pred = summary(report, "capacity_predicted")
            if cap is not None:
                ax.bar(x - 0.19, cap, 0.38, color="tab:blue", label="measured" if x == 0 else None)
            if pred is not None:
                ax.bar(x + 0.19, pred, 0.38, color="tab:gray", label="predicted (kv)" if x == 0 else None)
            ymax = max(ymax, cap or 0, pred or 0)
        elif cap is not None:
            ax.bar(x, cap, 0.6, color="tab:blue")
            ymax = max(ymax, cap)
        per_token = summary(report, "kv_bytes_per_token")
        if per_token is not None:
            ax2.bar(x, per_token / 1024.0, 0.6, color="tab:green")
    label_failures(ax, range(len(points)), points, ymax)
    ax.set_ylabel("concurrent sequences")
    ax.set_title(f"{kind}: capacity at the context length")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    ax2.set_ylabel("KiB per token (per rank)")
    ax2.set_title("KV bytes per token")
    names = [p[0] for p in points]
    ax2.set_xticks(range(len(names)))
    ax2.set_xticklabels(names, rotation=45 if len(names) > 4 else 0, ha="right" if len(names) > 4 else "center")
    finish(fig, ax, names, os.path.join(out_dir, f"{kind}_capacity.png"), written)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="+", help="a sweep folder, a sweep.json, or gpuledger report files")
    ap.add_argument("--out", help="folder for the PNGs (default: next to the first input)")
    args = ap.parse_args(argv)
    points, out_dir = load_points(args.inputs)
    out_dir = args.out or out_dir
    os.makedirs(out_dir, exist_ok=True)

    by_kind = {}
    for p in points:
        kind = p[1].get("kind") if p[1] else None
        by_kind.setdefault(kind, []).append(p)
    # A point whose report is missing goes with the others' kind (a one-kind sweep).
    if None in by_kind and len(by_kind) == 2:
        orphans = by_kind.pop(None)
        by_kind[next(iter(by_kind))].extend(orphans)
    written = []
    for kind, pts in by_kind.items():
        if kind in ("plan", "train"):
            plot_memory(kind, pts, out_dir, written)
        if kind == "train":
            plot_mfu(pts, out_dir, written)
        if kind in ("kv", "infer"):
            plot_capacity(kind, pts, out_dir, written)
    if not written:
        print("plot.py: nothing to plot (kinds: %s)" % ", ".join(str(k) for k in by_kind), file=sys.stderr)
        return 1
    for w in written:
        print(w)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
