#!/usr/bin/env python3
"""Predicted against measured step time on this machine (docs/perf-model.md).

Calibrates this machine's device profiles (1 and 2 threads, each in fp32 and bf16: a profile fits
the runs whose ranks have its threads and dtype) and, under `mpirun -n 2 --bind-to core`, its
network profile; then, for each point, runs the measured CPU run

    gpuledger train --backend cpu <flags> --steps S --warmup W --json FILE          (1 rank, --repeat R)
    mpirun -n 2 --bind-to core gpuledger train --backend cpu <flags> ...             (2 ranks, R launches)

and the prediction from the meta backend with the same flags and the matching profiles

    gpuledger train --backend meta <flags> --device-profile FILE --network-profile FILE --json FILE

and writes results/perf_validation/README.md: a table (point, predicted ms, measured median ms,
error %), the exact commands, the machine's fingerprint and the load each point ran under.

Noise: measured and predicted points alternate in one run of this script; the measured figure
is the median over R repetitions of each repetition's median step (after W warm-up steps).
Before each measured run the script waits (up to --max-wait seconds) until the 1-minute load
average is below --max-load, and it records the share of the CPUs' time that processes other
than its own children used while the run ran (/proc/stat's busy time less the children's CPU
time): a point measured beside other work says so in the table.

Builds nothing: give it a gpuledger binary. Standard library only.
Usage: validate_perf.py --gpuledger build/bench/gpuledger [--predict-with BIN] [--out results/perf_validation]
       [--quick] [--points REGEX] [--steps S] [--warmup W] [--repeat R]
"""
import argparse
import json
import os
import pathlib
import re
import shlex
import statistics
import subprocess
import sys
import time

MPI_ENV = {
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "OMPI_MCA_rmaps_base_oversubscribe": "1",
    "OMPI_MCA_btl": "self,vader",
    "OMPI_MCA_pml": "ob1",
}
MPIRUN = ["mpirun", "-n", "2", "--bind-to", "core"]
TARGET_MAX_PCT = 15.0  # every point within ±15 %
TARGET_MEDIAN_PCT = 7.0  # the median |error| at most 7 %


def points(quick):
    """(name, ranks, dtype, flags) of every point; flags exclude --backend, steps and output."""
    out = []
    seqs = (256,) if quick else (128, 256)
    for model in ("small-gpt", "small-llama"):
        for seq in seqs:
            base = ["--model", model, "--seq", str(seq), "--mbs", "1"]
            tag = f"{model} seq {seq}"
            out.append((f"{tag} 1 rank bf16", 1, "bf16", base + ["--dtype", "bf16"]))
            if seq != seqs[-1]:
                continue  # the layouts at the longer sequence only
            out.append((f"{tag} 1 rank fp32", 1, "fp32", base + ["--dtype", "fp32"]))
            for r in ("selective", "full"):
                out.append((f"{tag} recompute {r}", 1, "bf16", base + ["--dtype", "bf16", "--recompute", r]))
            out.append((f"{tag} flash", 1, "bf16", base + ["--dtype", "bf16", "--attention", "flash"]))
            two = base + ["--dtype", "bf16"]
            out.append((f"{tag} dp 2", 2, "bf16", two + ["--dp", "2"]))
            out.append((f"{tag} dp 2 zero 1", 2, "bf16", two + ["--dp", "2", "--zero", "1"]))
            out.append((f"{tag} dp 2 zero 3", 2, "bf16", two + ["--dp", "2", "--zero", "3"]))
            out.append((f"{tag} tp 2", 2, "bf16", two + ["--tp", "2"]))
            out.append((f"{tag} tp 2 sp", 2, "bf16", two + ["--tp", "2", "--sp"]))
            out.append((f"{tag} pp 2 1f1b m4", 2, "bf16", two + ["--pp", "2", "--microbatches", "4"]))
            out.append((f"{tag} pp 2 gpipe m4", 2, "bf16",
                        two + ["--pp", "2", "--microbatches", "4", "--schedule", "gpipe"]))
            # Ring attention merges flash blocks: context parallelism runs flash attention.
            out.append((f"{tag} cp 2 flash", 2, "bf16", two + ["--cp", "2", "--attention", "flash"]))
            out.append((f"{tag} dp 2 fp32", 2, "fp32", base + ["--dtype", "fp32", "--dp", "2"]))
    return out


def load1():
    return float(pathlib.Path("/proc/loadavg").read_text().split()[0])


def busy_jiffies():
    """(busy, total) jiffies of all CPUs from /proc/stat's first line."""
    f = [int(x) for x in pathlib.Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = f[3] + (f[4] if len(f) > 4 else 0)
    return sum(f) - idle, sum(f)


class Runner:
    def __init__(self, args, log):
        self.args = args
        self.log = log
        self.commands = []
        self.env = dict(os.environ, **MPI_ENV)

    def run(self, cmd, record=True):
        """Runs cmd; returns (stdout, stderr, wall seconds, other processes' CPU share)."""
        if record:
            self.commands.append(shlex.join(cmd))
        self.log(f"$ {shlex.join(cmd)}")
        b0, t0 = busy_jiffies()
        c0 = os.times()
        w0 = time.monotonic()
        p = subprocess.run(cmd, capture_output=True, text=True, env=self.env)
        wall = time.monotonic() - w0
        c1 = os.times()
        b1, t1 = busy_jiffies()
        if p.returncode != 0:
            raise RuntimeError(f"exit {p.returncode}: {shlex.join(cmd)}\n{p.stderr[-3000:]}")
        hz = os.sysconf("SC_CLK_TCK")
        ours = (c1.children_user - c0.children_user) + (c1.children_system - c0.children_system)
        busy = (b1 - b0) / hz
        cpus = os.cpu_count() or 1
        other = max(0.0, busy - ours) / (wall * cpus) if wall > 0 else 0.0
        return p.stdout, p.stderr, wall, other

    def wait_quiet(self):
        """Waits until the 1-minute load is below --max-load, at most --max-wait s; returns the load."""
        deadline = time.monotonic() + self.args.max_wait
        load = load1()
        while load > self.args.max_load and time.monotonic() < deadline:
            time.sleep(5)
            load = load1()
        return load


def has_prediction(gpl):
    text = subprocess.run([gpl, "train", "--help"], capture_output=True, text=True).stdout
    return "--device-profile" in text


def calibrate(r, gpl, out, chosen):
    """The four device profiles and the two network profiles: {(threads, dtype): path}, {dtype: path}.

    Each device profile also measures every GEMM call of the chosen points it will predict
    (`calibrate --for`, one per point: 1 rank → the 2-thread profile, 2 ranks → the 1-thread one).
    """
    prof = out / "profiles"
    prof.mkdir(parents=True, exist_ok=True)
    paths, networks = {}, {}

    def runs_of(threads, dtype):
        fors = []
        for _, ranks, d, flags in chosen:
            if d == dtype and (2 if ranks == 1 else 1) == threads:
                fors += ["--for", " ".join(flags)]
        return fors

    for dtype, other in (("bf16", "fp32"), ("fp32", "bf16")):
        r.wait_quiet()
        dev2 = prof / f"device-2threads-{dtype}.json"
        r.run([gpl, "calibrate", "--threads", "2", "--dtypes", f"{dtype},{other}", "--out", str(dev2)] +
              runs_of(2, dtype))
        paths[(2, dtype)] = dev2
        r.wait_quiet()
        # Under the 2-rank launch: both ranks measure the network in the dtype, then the device at
        # once with the one core each binding gives (--threads 1 says so explicitly); rank 0 writes.
        dev1 = prof / f"device-1thread-{dtype}.json"
        net = prof / f"network-{dtype}.json"
        r.run(MPIRUN + [gpl, "calibrate", "--threads", "1", "--dtypes", f"{dtype},{other}",
                        "--out", str(dev1), "--network-out", str(net)] + runs_of(1, dtype))
        paths[(1, dtype)] = dev1
        networks[dtype] = net
    return paths, networks


def measured(r, gpl, ranks, flags, tmp):
    """The median over --repeat repetitions of each one's median step (ms), and the noise figures."""
    steps = ["--steps", str(r.args.steps), "--warmup", str(r.args.warmup)]
    js = tmp / "measured.json"
    loads, others, medians = [], [], []
    if ranks == 1:
        loads.append(r.wait_quiet())
        cmd = [gpl, "train", "--backend", "cpu"] + flags + steps + ["--repeat", str(r.args.repeat), "--json",
                                                                    str(js), "--quiet"]
        _, _, _, other = r.run(cmd)
        others.append(other)
        s = json.loads(js.read_text())["summary"]
        medians = [x["median_step_ms"] for x in s.get("repeats", [])] or [s["median_step_ms"]]
    else:
        # One launch per repetition (a launch runs one repetition).
        for i in range(r.args.repeat):
            loads.append(r.wait_quiet())
            cmd = MPIRUN + [gpl, "train", "--backend", "cpu"] + flags + steps + ["--json", str(js), "--quiet"]
            _, _, _, other = r.run(cmd, record=i == 0)
            others.append(other)
            medians.append(json.loads(js.read_text())["summary"]["median_step_ms"])
    return statistics.median(medians), medians, max(loads), max(others)


def predicted(r, gpl, flags, device, network, ranks, tmp):
    js = tmp / "predicted.json"
    cmd = [gpl, "train", "--backend", "meta"] + flags + ["--device-profile", str(device)]
    if ranks > 1:
        cmd += ["--network-profile", str(network)]
    cmd += ["--json", str(js), "--quiet"]
    r.run(cmd)
    return json.loads(js.read_text())["summary"]["predicted"]["step_ms"]


def fingerprint(device_profile):
    doc = json.loads(pathlib.Path(device_profile).read_text())
    f = dict(doc.get("fingerprint", {}))
    f.pop("gpu", None)
    return f


def write_report(out, rows, commands, fp, can_predict, args, started, finished, failed):
    lines = ["# Predicted against measured step time on this machine", ""]
    lines += ["```", "python3 " + shlex.join(sys.argv), "```", ""]
    lines += [
        f"Written by `scripts/validate_perf.py` ({started} to {finished} UTC). Measured: the median over "
        f"{args.repeat} repetitions of each repetition's median step ({args.steps} steps, the first "
        f"{args.warmup} left out). Predicted: `train --backend meta` with the same flags and the device "
        "profile of the run's threads (1 rank: 2 threads; 2 ranks under `--bind-to core`: 1) and dtype. "
        "Error = (predicted − measured) / measured. Load: the 1-minute load average before the run "
        "(the highest over repetitions); other CPU: the share of the CPUs' time that processes other "
        "than this script's used while it ran.", ""]
    if not can_predict:
        lines += ["**The binary has no prediction** (`train --help` lists no `--device-profile`): only the "
                  "measured side is filled in.", ""]
    lines += ["| point | ranks | predicted ms | measured median ms | error % | repetitions (ms) | load | other CPU |",
              "|---|---|---|---|---|---|---|---|"]
    errors = []
    for row in rows:
        err = ""
        if row["predicted_ms"] is not None:
            e = 100.0 * (row["predicted_ms"] - row["measured_ms"]) / row["measured_ms"]
            errors.append(e)
            err = f"{e:+.1f}"
        pred = f"{row['predicted_ms']:.1f}" if row["predicted_ms"] is not None else "—"
        reps = ", ".join(f"{x:.1f}" for x in row["repetitions_ms"])
        lines.append(f"| {row['point']} | {row['ranks']} | {pred} | {row['measured_ms']:.1f} | {err} | {reps} | "
                     f"{row['load']:.2f} | {100 * row['other_cpu']:.0f} % |")
    lines.append("")
    if errors:
        worst = max(abs(e) for e in errors)
        med = statistics.median(abs(e) for e in errors)
        met = worst <= TARGET_MAX_PCT and med <= TARGET_MEDIAN_PCT
        lines += [f"Largest |error| {worst:.1f} %, median |error| {med:.1f} % over {len(errors)} points "
                  f"(target: every point within ±{TARGET_MAX_PCT:.0f} %, median ≤ {TARGET_MEDIAN_PCT:.0f} %): "
                  f"{'met' if met else 'not met'}.", ""]
    if failed:
        lines += ["Points that failed:", ""] + [f"- {f}" for f in failed] + [""]
    lines += ["## The machine", "", "```json", json.dumps(fp, indent=2, sort_keys=True), "```", ""]
    lines += ["## The commands", "", "In the order they ran (a 2-rank point's repetitions repeat its first "
              "command; the environment carries " + " ".join(f"{k}={v}" for k, v in MPI_ENV.items()) + "):",
              "", "```"] + commands + ["```", ""]
    (out / "README.md").write_text("\n".join(lines))
    (out / "results.json").write_text(json.dumps({"rows": rows, "fingerprint": fp}, indent=1) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpuledger", required=True, help="the gpuledger binary")
    ap.add_argument("--predict-with", default="",
                    help="another gpuledger binary to run the meta predictions with (default: --gpuledger)")
    ap.add_argument("--out", default="results/perf_validation", help="where the report goes")
    ap.add_argument("--quick", action="store_true", help="one sequence length")
    ap.add_argument("--points", default="", help="only the points whose name matches this regex")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--max-load", type=float, default=1.0, help="wait for a 1-minute load below this")
    ap.add_argument("--max-wait", type=float, default=60.0, help="seconds to wait for it at most")
    args = ap.parse_args()
    # As given, relative to where the script runs: the report names them so.
    gpl = args.gpuledger if "/" in args.gpuledger else "./" + args.gpuledger
    predictor = args.predict_with or gpl
    for option, path in (("--gpuledger", gpl), ("--predict-with", predictor)):
        if not os.access(path, os.X_OK):
            print(f"validate_perf: {option} {path}: not an executable", file=sys.stderr)
            return 2
    if args.steps <= args.warmup or args.repeat < 1:
        print("validate_perf: --steps must exceed --warmup and --repeat be 1 or more", file=sys.stderr)
        return 2
    try:
        selected = re.compile(args.points)
    except re.error as e:
        print(f"validate_perf: --points {args.points}: {e}", file=sys.stderr)
        return 2
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "tmp"
    tmp.mkdir(exist_ok=True)
    started = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    r = Runner(args, lambda m: print(m, file=sys.stderr, flush=True))
    can_predict = has_prediction(predictor)
    chosen = [p for p in points(args.quick) if selected.search(p[0])]
    profiles, networks = calibrate(r, gpl, out, chosen)
    rows, failed = [], []
    for name, ranks, dtype, flags in chosen:
        network = networks[dtype]
        try:
            ms, reps, load, other = measured(r, gpl, ranks, flags, tmp)
            threads = 2 if ranks == 1 else 1
            pred = predicted(r, predictor, flags, profiles[(threads, dtype)], network, ranks, tmp) if can_predict else None
        except RuntimeError as e:  # a point that fails is reported, and the others still run
            print(f"validate_perf: {name}: {e}", file=sys.stderr, flush=True)
            failed.append(f"{name}: {str(e).splitlines()[0]}")
            continue
        rows.append({"point": name, "ranks": ranks, "flags": flags, "predicted_ms": pred, "measured_ms": ms,
                     "repetitions_ms": reps, "load": load, "other_cpu": other})
        print(f"validate_perf: {name}: predicted {pred} ms, measured {ms:.1f} ms", file=sys.stderr, flush=True)
    finished = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    write_report(out, rows, r.commands, fingerprint(profiles[(2, "bf16")]), can_predict, args, started, finished,
                 failed)
    for f in tmp.iterdir():
        f.unlink()
    tmp.rmdir()
    print(f"validate_perf: wrote {out / 'README.md'}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
