#!/usr/bin/env python3
"""Compare two Google Benchmark JSON outputs of gpl_micro / gpl_micro_comm.

    scripts/micro_compare.py BASELINE.json CONTENDER.json [--alpha 0.05] [--min-change 0.05]
                             [--filter REGEX] [--fail-on-slower]

For every benchmark present in both files, the per-repetition times (the
"iteration" entries; run with --benchmark_repetitions=N, N >= 3 for a test to
mean anything) are compared with a two-sided Mann-Whitney U test (normal
approximation with tie correction; exact enough from about 5 repetitions a
side, and conservative below). A benchmark is reported slower when the test
rejects "same distribution" at --alpha AND its median time grew by more than
--min-change (a significant 0.3% is noise on a shared machine, not a
regression). With one repetition a side there is no test: the change is shown
and marked "untested". Exit status 1 with --fail-on-slower when anything got
slower, 2 on unreadable input. Debian's libbenchmark-dev ships no compare.py,
hence this script (standard library only).
"""
import argparse
import json
import math
import re
import statistics
import sys

TIME_UNIT_S = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def load_times(path):
    """run_name -> list of per-iteration seconds, one per repetition."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"micro_compare: cannot read {path}: {e}")
    times = {}
    for b in doc.get("benchmarks", []):
        if b.get("run_type", "iteration") != "iteration" or b.get("error_occurred"):
            continue
        name = b.get("run_name", b["name"])
        times.setdefault(name, []).append(b["real_time"] * TIME_UNIT_S[b.get("time_unit", "ns")])
    return times


def mann_whitney_p(a, b):
    """Two-sided p-value of the Mann-Whitney U test, normal approximation
    with the tie correction of the variance (Mann & Whitney 1947)."""
    n1, n2 = len(a), len(b)
    pooled = sorted([(x, 0) for x in a] + [(x, 1) for x in b])
    ranks = [0.0] * len(pooled)
    ties = []
    i = 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2.0 + 1.0
        if j > i:
            ties.append(j - i + 1)
        i = j + 1
    r1 = sum(r for r, (_, side) in zip(ranks, pooled) if side == 0)
    u1 = r1 - n1 * (n1 + 1) / 2.0
    mu = n1 * n2 / 2.0
    n = n1 + n2
    tie_term = sum(t ** 3 - t for t in ties) / (n * (n - 1)) if n > 1 else 0.0
    var = n1 * n2 / 12.0 * ((n + 1) - tie_term)
    if var <= 0:
        return 1.0
    z = (abs(u1 - mu) - 0.5) / math.sqrt(var)   # continuity correction
    z = max(z, 0.0)
    return math.erfc(z / math.sqrt(2.0))


def fmt_s(s):
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3f} {unit}"
    return f"{s / 1e-9:.1f} ns"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("baseline")
    ap.add_argument("contender")
    ap.add_argument("--alpha", type=float, default=0.05, help="significance level (default 0.05)")
    ap.add_argument("--min-change", type=float, default=0.05,
                    help="smallest relative change of the median that counts (default 0.05 = 5%%)")
    ap.add_argument("--filter", default="", help="only benchmarks whose name matches this regex")
    ap.add_argument("--fail-on-slower", action="store_true", help="exit 1 when any benchmark got slower")
    a = ap.parse_args()

    base, new = load_times(a.baseline), load_times(a.contender)
    pattern = re.compile(a.filter)
    names = [n for n in base if n in new and pattern.search(n)]
    if not names:
        print("micro_compare: no benchmark in common" + (f" matching '{a.filter}'" if a.filter else ""))
        return 0
    width = max(len(n) for n in names)
    print(f"{'benchmark':<{width}}  {'baseline':>11}  {'contender':>11}  {'change':>8}  {'p':>6}  reps  verdict")
    slower = []
    for n in names:
        b, c = base[n], new[n]
        mb, mc = statistics.median(b), statistics.median(c)
        change = (mc - mb) / mb if mb > 0 else 0.0
        if len(b) < 2 or len(c) < 2:
            p, verdict = float("nan"), "untested"
        else:
            p = mann_whitney_p(b, c)
            if p < a.alpha and abs(change) > a.min_change:
                verdict = "SLOWER" if change > 0 else "faster"
            else:
                verdict = "same"
        if verdict == "SLOWER":
            slower.append((n, change, p))
        print(f"{n:<{width}}  {fmt_s(mb):>11}  {fmt_s(mc):>11}  {100 * change:>+7.1f}%  {p:>6.3f}  "
              f"{len(b)}/{len(c)}  {verdict}")
    print()
    if slower:
        print(f"{len(slower)} slower (p < {a.alpha}, median +{100 * a.min_change:.0f}% or more):")
        for n, change, p in sorted(slower, key=lambda x: -x[1]):
            print(f"  {n}: {100 * change:+.1f}% (p = {p:.3f})")
    else:
        print("nothing slower")
    return 1 if slower and a.fail_on_slower else 0


if __name__ == "__main__":
    sys.exit(main())
