#!/usr/bin/env python3
"""Does the sum of per-op microbenchmark times explain a training step?

    bench/micro/step_sum.py TRAIN.json MICRO.json --preset llama2-7b --seq 1024 --dtype fp32

TRAIN.json: `gpuledger train --layers L --profile --json` of a llama-flavour
model, tp 1, materialized attention, no dropout, one microbatch. MICRO.json:
gpl_micro --benchmark_out at the same preset, seq, mbs and dtype, with
--gpl_adamw_params set to the model's total parameters (report "params.total").

The step, op by op, as the trainer issues it (calls per step read from the
profile where an op has one shape; the GEMMs from the layer's recipe):
  GEMMs: per layer QKV, O, gate, up, down in fwd, dgrad and wgrad, plus the
    LM head's three; the attention core's six batched GEMMs and its softmax
    (gpl_micro's attention/materialized fwd + bwd, which include the softmax);
  every other op: its benchmark's time × its calls per step in the profile.
Prints, per op, the profile's seconds per step next to the microbenchmarks'
sum, and the total against the measured median step.
"""
import argparse
import json
import statistics
import sys

UNIT_S = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def micro_medians(path):
    with open(path) as f:
        doc = json.load(f)
    reps = {}
    for b in doc["benchmarks"]:
        if b.get("run_type") != "iteration" or b.get("error_occurred"):
            continue
        reps.setdefault(b["run_name"], []).append(b["real_time"] * UNIT_S[b["time_unit"]])
    return {k: statistics.median(v) for k, v in reps.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("train")
    ap.add_argument("micro")
    ap.add_argument("--preset", required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--dtype", default="fp32")
    ap.add_argument("--backend", default="cpu")
    a = ap.parse_args()

    with open(a.train) as f:
        train = json.load(f)
    rank = train["ranks"][0]
    cfg = train["config"]
    layers = cfg["model"]["layers"]
    warmup = cfg["train"]["warmup"]
    timed_steps = len(rank["time"]["step_ms"]) - warmup
    ops = rank["op_time"]
    per_step = {k: v["seconds"] / timed_steps for k, v in ops.items()}
    calls = {k: v["calls"] / timed_steps for k, v in ops.items()}
    params = train["params"]["total"]

    t = micro_medians(a.micro)
    P, be, dt, sq = a.preset, a.backend, a.dtype, f"seq:{a.seq}"

    def bench(name):
        key = f"{name}/manual_time"
        if key not in t:
            sys.exit(f"step_sum: {key} not in {a.micro}")
        return t[key]

    rows = []   # (label, profile s/step, micro s/step)
    lin = sum(bench(f"gemm/{be}/{P}/{l}/{p}/{dt}/{sq}") for l in ("qkv", "o", "gate", "up", "down")
              for p in ("fwd", "dgrad", "wgrad")) * layers
    head = sum(bench(f"gemm/{be}/{P}/lm_head/{p}/{dt}/{sq}") for p in ("fwd", "dgrad", "wgrad"))
    core = (bench(f"attention/{be}/{P}/materialized/fwd/{dt}/{sq}") +
            bench(f"attention/{be}/{P}/materialized/bwd/{dt}/{sq}")) * layers
    prof_core = per_step.get("gemm", 0) + per_step.get("softmax_forward", 0) + per_step.get("softmax_backward", 0)
    rows.append(("gemm + softmax (linears, LM head, attention core)", prof_core, lin + head + core))
    rows.append(("  of which: layer linears fwd/dgrad/wgrad", None, lin))
    rows.append(("  of which: LM head fwd/dgrad/wgrad", None, head))
    rows.append(("  of which: attention core fwd + bwd", None, core))
    rows.append(("adamw", per_step.get("optimizer_update", 0), bench(f"adamw/{be}/{dt}/params:{params}")))
    rows.append(("sum_squares (gradient norm)", per_step.get("sum_squares", 0),
                 bench(f"grad_norm/{be}/{dt}/params:{params}")))
    single = {
        "cross_entropy_forward": f"cross_entropy/{be}/{P}/fwd/{sq}",
        "cross_entropy_backward": f"cross_entropy/{be}/{P}/bwd/{sq}",
        "rmsnorm_forward": f"norm/{be}/{P}/rmsnorm/fwd/{dt}/{sq}",
        "rmsnorm_backward": f"norm/{be}/{P}/rmsnorm/bwd/{dt}/{sq}",
        "swiglu_forward": f"elementwise/{be}/{P}/swiglu_fwd/{dt}/{sq}",
        "swiglu_backward": f"elementwise/{be}/{P}/swiglu_bwd/{dt}/{sq}",
        "add": f"elementwise/{be}/{P}/add/{dt}/{sq}",
        "split_qkv": f"elementwise/{be}/{P}/split_qkv/{dt}/{sq}",
        "merge_qkv_grad": f"elementwise/{be}/{P}/merge_qkv_grad/{dt}/{sq}",
        "merge_heads": f"elementwise/{be}/{P}/merge_heads/{dt}/{sq}",
        "split_heads": f"elementwise/{be}/{P}/split_heads/{dt}/{sq}",
        "embedding_forward": f"elementwise/{be}/{P}/embedding_fwd/{dt}/{sq}",
        "embedding_backward": f"elementwise/{be}/{P}/embedding_bwd/{dt}/{sq}",
    }
    for op, name in single.items():
        if op in ops:
            rows.append((op, per_step[op], bench(name) * calls[op]))
    for op, d in (("rope_forward", "fwd"), ("rope_backward", "bwd")):
        if op in ops:   # half the calls rotate q, half k
            half = calls[op] / 2
            rows.append((op, per_step[op], half * (bench(f"rope/{be}/{P}/q/{d}/{dt}/{sq}") +
                                                   bench(f"rope/{be}/{P}/k/{d}/{dt}/{sq}"))))
    covered = {"gemm", "softmax_forward", "softmax_backward", "optimizer_update", "sum_squares", "rope_forward",
               "rope_backward", *single}
    for op in sorted(set(ops) - covered):
        rows.append((op + " (no microbenchmark)", per_step[op], 0.0))

    step_s = rank["time"]["median_step_ms"] / 1e3
    prof_total = sum(per_step.values())
    micro_total = sum(m for label, p, m in rows if not label.startswith("  "))
    print(f"{'op':<52} {'profile s/step':>15} {'micro s/step':>13} {'micro/profile':>14}")
    for label, p, m in rows:
        ps = f"{p:15.3f}" if p is not None else " " * 15
        ratio = f"{m / p:14.2f}" if p else " " * 14
        print(f"{label:<52} {ps} {m:13.3f} {ratio}")
    print()
    print(f"measured median step (train, {timed_steps} timed steps): {step_s:.3f} s")
    print(f"sum of profiled ops per step:                 {prof_total:.3f} s "
          f"({100 * prof_total / step_s:.1f}% of the step)")
    print(f"sum of microbenchmarks per step:              {micro_total:.3f} s "
          f"= {micro_total / step_s:.3f} × the step ({100 * (micro_total / step_s - 1):+.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
