#!/usr/bin/python3
"""Plots gpuledger reports: a sweep folder (its sweep.json index), report files, or a history.

    /usr/bin/python3 scripts/plot.py results/sweep-70b            # a `gpuledger sweep` folder
    /usr/bin/python3 scripts/plot.py a.json b.json --out plots/   # reports, one point per file
    /usr/bin/python3 scripts/plot.py --history nightly/history.jsonl --out plots/

What it draws, one PNG per figure (next to the input, or in --out):
  <kind>_memory.png   plan and train: stacked bars of bytes by account for each point's busiest
                      rank -- the exact budget (hatched) and, for train, the measured breakdown at the
                      rank's peak beside it; each point's device memory as a dashed mark over its own
                      bars; failed points faded, their status in the axis label.
  train_mfu.png       train: MFU per layout, one panel per (recompute, ZeRO) pair, as a heatmap
                      (layouts across, the other swept settings down); failed and skipped points are
                      grey cells marked with their status. Readable at hundreds of points: every label
                      has a cell of its own.
  train_recompute.png train, when points differ only in recompute: activation bytes saved against step
                      time added, each beside the run without recompute, and HFU - MFU per mode.
  <name>_ranks.png    each report given as a file (plan, train): every rank's bytes by account,
                      budget beside measured, labelled with its pipeline stage.
  <name>_timeline.png each train report with --timeline: live bytes by account at every phase
                      marker of the busiest rank's step.
  kv_capacity.png     kv: concurrent sequences that fit (capacity) and KV bytes per token.
  infer_capacity.png  infer: capacity measured by filling the pool beside the kv prediction.
  history.png         --history: MFU and tokens/s of each point, night after night (gpuledger regress
                      --history writes the file); runs that regressed are marked.

Reads only the report schema (docs/report.md), the sweep index (docs/sweep.md) and the history lines
(docs/regress.md). Headless (Agg). Needs matplotlib: Debian's python3-matplotlib through
/usr/bin/python3 (scripts/setup.sh).
"""
import argparse
import datetime
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

ACCOUNTS = ["weights", "grads", "master", "optim", "activations", "kv", "comm", "workspace"]
COLORS = dict(zip(ACCOUNTS, plt.get_cmap("tab10").colors))
LABEL_PT = 9.0  # the room one rotated tick label needs, in points: thinning keeps labels apart


# ---- loading ----

def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def load_points(inputs):
    """[point dict] in input order, the folder to write next to, and whether the inputs were report files."""
    points = []
    out_dir = None
    files = True
    for item in inputs:
        index_path = os.path.join(item, "sweep.json") if os.path.isdir(item) else item
        doc = load_json(index_path)
        base = os.path.dirname(os.path.abspath(index_path))
        out_dir = out_dir or base
        if doc.get("schema", "").startswith("gpuledger.sweep/"):
            files = False
            for p in doc["points"]:
                path = os.path.join(base, p["report"])
                report = load_json(path) if os.path.exists(path) else None
                points.append({"name": p["name"], "report": report, "status": p.get("status", "error"),
                               "values": p.get("values", {})})
        elif doc.get("schema", "").startswith("gpuledger.report/"):
            name = os.path.splitext(os.path.basename(index_path))[0]
            points.append({"name": name, "report": doc, "status": doc.get("status", "error"),
                           "values": settings_of(doc)})
        else:
            raise SystemExit(f"plot.py: {index_path}: neither a sweep index nor a gpuledger report")
    return points, out_dir, files


def settings_of(report):
    """A report given as a file: its settings as a sweep would name them (model, seq, ...)."""
    config = report.get("config", {})
    values = {"model": (config.get("model") or {}).get("name")}
    for section in ("layout", "run"):
        for k, v in (config.get(section) or {}).items():
            if isinstance(v, (str, int, float, bool)):
                values[k] = str(v)
    return {k: v for k, v in values.items() if v is not None}


def busiest_rank(report, measured):
    """The rank with the largest measured peak (train) or exact budget (plan)."""
    best, best_bytes = None, -1
    for r in (report or {}).get("ranks", []):
        b = r.get("measured", {}).get("peak_bytes") if measured else r.get("analytic", {}).get("exact", {}).get("total")
        if b is not None and b > best_bytes:
            best, best_bytes = r, b
    return best


def accounts_of(d):
    return [float(d.get(a, 0) or 0) for a in ACCOUNTS]


def summary(report, key):
    return (report or {}).get("summary", {}).get(key)


def setting(point, section, key, default=None):
    """A point's setting: its report's config, else the sweep's value for it."""
    value = ((point["report"] or {}).get("config", {}).get(section, {}) or {}).get(key)
    if value is None:
        value = point["values"].get(key, default)
    return default if value is None else value


def layout_label(point):
    return f"d{setting(point, 'layout', 'dp', 1)} t{setting(point, 'layout', 'tp', 1)} p{setting(point, 'layout', 'pp', 1)}"


def other_label(point, keys):
    return " ".join(f"{k} {point['values'][k]}" for k in keys if k in point["values"]) or "-"


# ---- drawing helpers ----

def byte_unit(max_bytes):
    """The binary unit that keeps the axis readable: (divisor, name)."""
    for div, name in ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if max_bytes >= div:
            return float(div), name
    return 1.0, "B"


def figure_width(n, per_item=0.45, least=7.0, most=30.0):
    return min(most, max(least, per_item * n + 3.5))


def set_names(ax, names, width_in, axis="x", offset=0.0):
    """Tick labels, every k-th when they would not fit side by side (rotated 90 degrees, LABEL_PT each),
    name i at i + offset."""
    fits = max(1, int(width_in * 72 / LABEL_PT))
    step = max(1, math.ceil(len(names) / fits))
    ticks = list(range(0, len(names), step))
    rotate = len(names) > 4 or max((len(n) for n in names), default=0) > 12
    if axis == "x":
        ax.set_xticks([t + offset for t in ticks])
        ax.set_xticklabels([names[i] for i in ticks], rotation=90 if rotate else 0, fontsize=7 if rotate else 9)
    else:
        ax.set_yticks(ticks)
        ax.set_yticklabels([names[i] for i in ticks], fontsize=7)
    return ticks


def point_names(points):
    """Axis labels: the point's name, with its status when it did not finish ('[oom]')."""
    return [p["name"] + ("" if p["status"] == "ok" else f" [{p['status']}]") for p in points]


def save(fig, path, written):
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    written.append(path)


def stacked_bar(ax, pos, values, width, div, hatched, faded, labelled):
    bottom = 0.0
    for name, v in zip(ACCOUNTS, values):
        if v <= 0:
            continue
        ax.bar(pos, v / div, width, bottom=bottom, color=COLORS[name], hatch="//" if hatched else None,
               edgecolor="white", linewidth=0.3, alpha=0.35 if faded else 1.0,
               label=None if name in labelled else name)
        labelled.add(name)
        bottom += v / div
    return bottom


def account_legend(ax, measured, extra=()):
    handles, labels = ax.get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda i: ACCOUNTS.index(labels[i]) if labels[i] in ACCOUNTS else 99)
    handles, labels = [handles[i] for i in order], [labels[i] for i in order]
    if measured:
        handles += [plt.Rectangle((0, 0), 1, 1, facecolor="lightgray", hatch="//", edgecolor="white"),
                    plt.Rectangle((0, 0), 1, 1, facecolor="lightgray")]
        labels += ["budget (exact)", "measured at peak"]
    for h, lab in extra:
        handles.append(h)
        labels.append(lab)
    ax.legend(handles, labels, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))


# ---- memory: one bar pair per point, and one per rank of a report ----

def device_bytes_of(report, rank):
    return (rank or {}).get("device_bytes") or (report or {}).get("config", {}).get("memory_limit_bytes") \
        or (report or {}).get("config", {}).get("device_memory_bytes")


def draw_budget_vs_measured(ax, entries, measured, title, ylabel):
    """entries: [(report, rank json, faded)]; one budget bar (and a measured one) per entry."""
    width = 0.38 if measured else 0.6
    tops = []
    for report, rank, _ in entries:
        if rank:
            tops.append(sum(accounts_of(rank.get("analytic", {}).get("exact", {}))))
            tops.append(sum(accounts_of(rank.get("measured", {}).get("at_peak", {}))))
            tops.append(device_bytes_of(report, rank) or 0)
    div, unit = byte_unit(max(tops + [1]))
    labelled, device_mark = set(), None
    for x, (report, rank, faded) in enumerate(entries):
        if not rank:
            continue
        budget = accounts_of(rank.get("analytic", {}).get("exact", {}))
        stacked_bar(ax, x - width / 2 if measured else x, budget, width, div, True, faded, labelled)
        if measured and "measured" in rank:
            stacked_bar(ax, x + width / 2, accounts_of(rank["measured"].get("at_peak", {})), width, div, False, faded,
                        labelled)
        device = device_bytes_of(report, rank)
        if device:  # over this point's own bars: points may have different devices
            device_mark = ax.hlines(device / div, x - 0.48, x + 0.48, colors="black", linestyles="--", linewidth=1)
    ax.set_ylabel(ylabel.format(unit=unit))
    ax.set_title(title)
    account_legend(ax, measured, [(device_mark, "device memory")] if device_mark else [])


def plot_memory(kind, points, out_dir, written):
    measured = kind in ("train", "infer")
    entries = []
    for p in points:
        rank = busiest_rank(p["report"], measured) or busiest_rank(p["report"], False)
        entries.append((p["report"], rank, p["status"] != "ok"))
    width = figure_width(len(points))
    fig, ax = plt.subplots(figsize=(width, 5))
    draw_budget_vs_measured(ax, entries, measured,
                            f"{kind}: bytes by account on each point's busiest rank"
                            + (", budget (hatched) beside measured" if measured else ", exact budget"),
                            "{unit} on the busiest rank")
    ticks = set_names(ax, point_names(points), width)
    for label, i in zip(ax.get_xticklabels(), ticks):
        if points[i]["status"] != "ok":
            label.set_color("firebrick")
    save(fig, os.path.join(out_dir, f"{kind}_memory.png"), written)


def plot_ranks(name, report, out_dir, written):
    """Every rank of one report, budget beside measured: pipeline stages hold different layers."""
    ranks = report.get("ranks", [])
    if not ranks:
        return
    measured = report.get("kind") == "train"
    width = figure_width(len(ranks), 0.5)
    fig, ax = plt.subplots(figsize=(width, 5))
    draw_budget_vs_measured(ax, [(report, r, r.get("status", "ok") != "ok") for r in ranks], measured,
                            f"{name}: bytes by account per rank" + (", budget (hatched) beside measured"
                                                                    if measured else ", exact budget"),
                            "{unit} on the rank")
    labels = []
    for r in ranks:
        c = r.get("coords", {})
        status = r.get("status", "ok")
        labels.append(f"rank {r.get('rank')} stage {c.get('pp', 0)}" + ("" if status == "ok" else f" [{status}]"))
    set_names(ax, labels, width)
    save(fig, os.path.join(out_dir, f"{name}_ranks.png"), written)


def plot_timeline(name, report, out_dir, written):
    """Live bytes by account at each phase marker of the busiest rank (train --timeline)."""
    rank = busiest_rank(report, True)
    samples = (rank or {}).get("measured", {}).get("timeline") or []
    if not samples:
        return
    # The timeline runs through every step; the last one is drawn (it ends at its optimizer marker).
    ends = [i for i, s in enumerate(samples) if s["phase"].startswith("optimizer")]
    steps = len(ends)
    if steps >= 2:
        samples = samples[ends[-2] + 1:ends[-1] + 1]
    top = max([s.get("live_total", 0) for s in samples] + [s.get("peak_since_prev", 0) for s in samples] + [1])
    div, unit = byte_unit(top)
    # Each marker's bytes hold until the next marker: a step drawn over [i, i + 1), labelled at its middle.
    xs = range(len(samples) + 1)
    series = [[float(s["live"].get(a, 0) or 0) / div for s in samples + samples[-1:]] for a in ACCOUNTS]
    width = figure_width(len(samples), 0.16, 8, 30)
    fig, ax = plt.subplots(figsize=(width, 5))
    kept = [(a, v) for a, v in zip(ACCOUNTS, series) if any(v)]
    ax.stackplot(xs, *[v for _, v in kept], labels=[a for a, _ in kept], colors=[COLORS[a] for a, _ in kept],
                 step="post")
    ax.step(xs, [s.get("peak_since_prev", 0) / div for s in samples + samples[-1:]], where="post", color="black",
            linewidth=0.8, label="peak since the previous marker")
    ax.set_xlim(0, len(samples))
    ax.set_ylabel(f"{unit} live on rank {rank.get('rank')}")
    which = f"step {steps} of {steps}" if steps >= 2 else "the run"
    ax.set_title(f"{name}: memory through {which}, by account, at each phase marker")
    set_names(ax, [s["phase"] for s in samples], width, offset=0.5)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    save(fig, os.path.join(out_dir, f"{name}_timeline.png"), written)


# ---- MFU across a sweep: facets by (recompute, ZeRO), heatmap of layout x other settings ----

def varying_keys(points, leave_out):
    keys = []
    for p in points:
        for k in p["values"]:
            if k not in keys and k not in leave_out:
                keys.append(k)
    return [k for k in keys if len({p["values"].get(k) for p in points}) > 1]


def layout_key(label):
    return tuple(int(part[1:]) for part in label.split())


def plot_mfu(points, out_dir, written):
    recomputes = sorted({str(setting(p, "run", "recompute", "none")) for p in points})
    zeros = sorted({int(setting(p, "layout", "zero", 0)) for p in points})
    layouts = sorted({layout_label(p) for p in points}, key=layout_key)
    others = varying_keys(points, {"dp", "tp", "pp", "zero", "recompute", "world", "gbs"})
    rest_of = (lambda p: other_label(p, others))
    if max((len(rest_of(p)) for p in points), default=0) > 28:  # too long to read: the points' own names
        rest_of = (lambda p: p["name"])
    rows = sorted({rest_of(p) for p in points})
    if len(layouts) == 1 and len(rows) > 1:  # one layout: the other settings across, one row
        layouts, rows = rows, ["-"]
        col_of, row_of = rest_of, (lambda p: "-")
    else:
        col_of, row_of = layout_label, rest_of
    cell_w, cell_h = 0.32, 0.3
    fig_w = min(34.0, max(6.0, len(zeros) * (len(layouts) * cell_w + 1.2) + 3.0))
    fig_h = min(34.0, max(3.5, len(recomputes) * (len(rows) * cell_h + 1.6) + 1.0))
    fig, axes = plt.subplots(len(recomputes), len(zeros), figsize=(fig_w, fig_h), squeeze=False,
                             layout="constrained")
    mfus = [100 * summary(p["report"], "mfu") for p in points if p["status"] == "ok" and summary(p["report"], "mfu")]
    vmax = max(mfus + [1e-9])
    cmap = plt.get_cmap("viridis").copy()
    cmap.set_bad("lightgray")
    annotate = len(layouts) * len(rows) <= 120
    image = None
    for i, rc in enumerate(recomputes):
        for j, z in enumerate(zeros):
            ax = axes[i][j]
            grid = [[float("nan")] * len(layouts) for _ in rows]
            marks = []
            for p in points:
                if str(setting(p, "run", "recompute", "none")) != rc or int(setting(p, "layout", "zero", 0)) != z:
                    continue
                x, y = layouts.index(col_of(p)), rows.index(row_of(p))
                mfu = summary(p["report"], "mfu")
                if p["status"] == "ok" and mfu is not None:
                    grid[y][x] = 100 * mfu
                    if annotate:
                        marks.append((x, y, f"{100 * mfu:.0f}", "white" if 100 * mfu < 0.6 * vmax else "black"))
                else:
                    marks.append((x, y, {"ok": "n/a"}.get(p["status"], p["status"][:3]), "firebrick"))
            image = ax.imshow(grid, cmap=cmap, vmin=0, vmax=vmax, aspect="auto", interpolation="nearest")
            for x, y, text, color in marks:
                ax.text(x, y, text, ha="center", va="center", fontsize=6, color=color)
            ax.set_title(f"recompute {rc}, ZeRO {z}", fontsize=9)
            if i == len(recomputes) - 1:  # the columns are the same in every panel: named once, below
                set_names(ax, layouts, len(layouts) * cell_w + 1.0)
            else:
                ax.set_xticks([])
            if j == 0:
                set_names(ax, rows, 0, axis="y")
            else:
                ax.set_yticks([])
    fig.colorbar(image, ax=axes, label="MFU %", shrink=0.8)
    fig.suptitle("train: MFU by layout (grey: no such point, or it failed: oom, err(or), che(ck failed))", fontsize=10)
    save(fig, os.path.join(out_dir, "train_mfu.png"), written)


# ---- the recompute trade-off ----

def plot_recompute(points, out_dir, written):
    """Each point with recompute beside the same point without it: activation bytes saved vs step time added."""
    def key(p):  # everything that configures the point but its recompute
        config = dict((p["report"] or {}).get("config", {}))
        config["run"] = {k: v for k, v in config.get("run", {}).items() if k != "recompute"}
        values = {k: v for k, v in p["values"].items() if k != "recompute"}
        return json.dumps([config, values], sort_keys=True)

    plain = {key(p): p for p in points if p["status"] == "ok" and setting(p, "run", "recompute", "none") == "none"}
    pairs = []
    for p in points:
        mode = setting(p, "run", "recompute", "none")
        base = plain.get(key(p))
        if mode == "none" or p["status"] != "ok" or not base:
            continue
        act = [busiest_rank(q["report"], True).get("measured", {}).get("peak_by_account", {}).get("activations", 0)
               for q in (base, p)]
        ms = [summary(q["report"], "median_step_ms") or 0 for q in (base, p)]
        gap = None
        if summary(p["report"], "hfu") is not None and summary(p["report"], "mfu") is not None:
            gap = 100 * (summary(p["report"], "hfu") - summary(p["report"], "mfu"))
        pairs.append((p["name"], mode, act[0] - act[1], ms[1] - ms[0], 100 * (ms[1] - ms[0]) / ms[0] if ms[0] else 0,
                      gap))
    if not pairs:
        return
    div, unit = byte_unit(max([abs(q[2]) for q in pairs] + [1]))
    modes = sorted({q[1] for q in pairs})
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    markers = dict(zip(modes, "os^Dv"))
    for mode in modes:
        sel = [q for q in pairs if q[1] == mode]
        ax.scatter([q[2] / div for q in sel], [q[4] for q in sel], marker=markers[mode], s=36, label=f"recompute {mode}")
    if len(pairs) <= 12:  # names beside the marks when they fit; otherwise the legend alone
        for q in pairs:
            ax.annotate(q[0], (q[2] / div, q[4]), textcoords="offset points", xytext=(4, 3), fontsize=7)
    ax.axhline(0, color="gray", linewidth=0.6)
    ax.set_xlabel(f"activation {unit} saved on the busiest rank (vs recompute none)")
    ax.set_ylabel("step time added (%)")
    ax.set_title("recompute: memory saved against time paid")
    ax.legend(fontsize=8)
    by_mode = [[q[5] for q in pairs if q[1] == m and q[5] is not None] for m in modes]
    ax2.boxplot([v or [0] for v in by_mode], labels=modes)
    ax2.set_ylabel("HFU - MFU (percentage points)")
    ax2.set_title("FLOPs executed beyond the model's (recompute)")
    fig.tight_layout()
    save(fig, os.path.join(out_dir, "train_recompute.png"), written)


# ---- kv and infer capacity ----

def plot_capacity(kind, points, out_dir, written):
    width = figure_width(2 * len(points), 0.5, 8, 30)
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(width, 4.5))
    for x, p in enumerate(points):
        report = p["report"]
        cap = summary(report, "capacity_sequences")
        if kind == "infer":
            pred = summary(report, "capacity_predicted")
            if cap is not None:
                ax.bar(x - 0.19, cap, 0.38, color="tab:blue", label="measured" if x == 0 else None)
            if pred is not None:
                ax.bar(x + 0.19, pred, 0.38, color="tab:gray", label="predicted (kv)" if x == 0 else None)
        elif cap is not None:
            ax.bar(x, cap, 0.6, color="tab:blue")
        per_token = summary(report, "kv_bytes_per_token")
        if per_token is not None:
            ax2.bar(x, per_token / 1024.0, 0.6, color="tab:green")
    ax.set_ylabel("concurrent sequences")
    ax.set_title(f"{kind}: capacity at the context length")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    ax2.set_ylabel("KiB per token (per rank)")
    ax2.set_title("KV bytes per token")
    for a in (ax, ax2):
        set_names(a, point_names(points), width / 2)
    save(fig, os.path.join(out_dir, f"{kind}_capacity.png"), written)


# ---- history: the nightly gate's lines ----

def plot_history(path, out_dir, written):
    runs = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                try:
                    runs.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise SystemExit(f"plot.py: {path}:{number}: not a JSON line: {e}")
    if not runs:
        raise SystemExit(f"plot.py: {path}: no runs")
    # One row per point (their scales differ by orders of magnitude), MFU beside tokens/s.
    names = sorted({r["point"] for r in runs})
    fig, axes = plt.subplots(len(names), 2, figsize=(11, 1.2 + 2.0 * len(names)), sharex=True, squeeze=False)
    for row, name in enumerate(names):
        for col, (metric, scale, unit) in enumerate((("mfu", 100, "MFU %"), ("tokens_per_s", 1, "tokens/s"))):
            ax = axes[row][col]
            pts = []
            for r in runs:
                m = (r.get("metrics") or {}).get(metric)
                if r["point"] == name and m:
                    when = datetime.datetime.strptime(r["when_utc"], "%Y-%m-%dT%H:%M:%SZ")
                    pts.append((when, scale * m["median"], r.get("status") != "ok"))
            ax.set_title(f"{name}: {unit} (median of repetitions)", fontsize=8)
            ax.grid(alpha=0.3)
            if not pts:
                ax.text(0.5, 0.5, "not timed (meta: bytes only)", ha="center", va="center", transform=ax.transAxes,
                        fontsize=8, color="gray")
                continue
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=4, color="tab:blue")
            bad = [p for p in pts if p[2]]
            ax.scatter([p[0] for p in bad], [p[1] for p in bad], marker="x", s=60, color="firebrick", zorder=3,
                       label="the gate failed this run" if bad else None)
            if bad:
                ax.legend(fontsize=7, loc="best")
    fig.suptitle(f"nightly: {len(runs)} runs of {len(names)} points ({os.path.basename(path)})", fontsize=10)
    fig.autofmt_xdate()
    save(fig, os.path.join(out_dir, "history.png"), written)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="*", help="a sweep folder, a sweep.json, or gpuledger report files")
    ap.add_argument("--out", help="folder for the PNGs (default: next to the first input)")
    ap.add_argument("--history", help="a history file (JSON lines of gpuledger regress --history)")
    args = ap.parse_args(argv)
    if not args.inputs and not args.history:
        ap.error("give reports, a sweep folder, or --history FILE")
    written = []
    if args.history:
        out_dir = args.out or os.path.dirname(os.path.abspath(args.history))
        os.makedirs(out_dir, exist_ok=True)
        plot_history(args.history, out_dir, written)
    if args.inputs:
        points, out_dir, files = load_points(args.inputs)
        out_dir = args.out or out_dir
        os.makedirs(out_dir, exist_ok=True)
        by_kind = {}
        for p in points:
            kind = p["report"].get("kind") if p["report"] else None
            by_kind.setdefault(kind, []).append(p)
        # A point whose report is missing goes with the others' kind (a one-kind sweep).
        if None in by_kind and len(by_kind) == 2:
            orphans = by_kind.pop(None)
            by_kind[next(iter(by_kind))].extend(orphans)
        for kind, pts in by_kind.items():
            if kind in ("plan", "train"):
                plot_memory(kind, pts, out_dir, written)
            if kind == "train":
                plot_mfu(pts, out_dir, written)
                plot_recompute(pts, out_dir, written)
            if kind in ("kv", "infer"):
                plot_capacity(kind, pts, out_dir, written)
            if files and kind in ("plan", "train"):
                for p in pts:
                    plot_ranks(p["name"], p["report"], out_dir, written)
                    if kind == "train":
                        plot_timeline(p["name"], p["report"], out_dir, written)
    if not written:
        print("plot.py: nothing to plot", file=sys.stderr)
        return 1
    for w in written:
        print(w)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
