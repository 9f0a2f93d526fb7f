#!/usr/bin/env python3
"""Predicts the dense GPT runs of Megatron-LM's published scaling table and sets the predicted MFU
beside the published one.

    python3 scripts/megatron_rows.py build/bench/gpuledger [--out results/megatron_rows] [--rows 1.7B,7.1B]

The table is the image images/model_table.png of NVIDIA/Megatron-LM's README (at the commit in
MEGATRON_COMMIT; the README names the code Megatron-Core r0.8.0): nine GPT models from 1.7B to 462B
on H100 GPUs, each with its heads, hidden size, layers, TP, PP, DP, batch, per-GPU TFLOP/s and MFU.
The README states the vocabulary (131,072), the sequence (4,096) and that DP, TP and PP communication
are overlapped with compute. The same assumptions hold for every row (ASSUMPTIONS below); none is
tuned per row. Each row becomes a model file and one `gpuledger train --backend meta` command on the
published h100-sxm profiles; the script writes the model files, every report, and README.md with the
table and the exact commands into --out. Python 3 standard library only.
"""
import argparse
import json
import os
import subprocess
import sys
import time

MEGATRON_COMMIT = "d98e8a64ddf34856e74b24714e3bedb2f5a39553"
MEGATRON_R080 = "baf94af3c667248865f23df73b9fb8e2395e6fd0"  # tag core_r0.8.0, the code the table names
TABLE_COMMIT = "f2e5db402c44ae309aa6448bcb4ae87e8ae0f5f4"  # the commit that added images/model_table.png
SOURCE = (f"NVIDIA/Megatron-LM README.md, images/model_table.png at {MEGATRON_COMMIT} "
          f"(table added in {TABLE_COMMIT}, Megatron-Core r0.8.0)")
VOCAB = 131072  # README: "Vocabulary size: 131,072 tokens"
SEQ = 4096  # README: "Sequence length: 4,096 tokens"
H100_PEAK = 989.4e12  # the published per-GPU TFLOP/s over MFU: 408.8 / 0.41 ~ 997, the dense bf16 peak

# The published rows: (name, heads, hidden, layers, tp, pp, dp, gpus, batch, tflops_per_gpu, mfu).
ROWS = [
    ("1.7B", 16, 2048, 24, 1, 1, 48, 48, 192, 408.8, 0.41),
    ("7.1B", 32, 4096, 30, 2, 1, 48, 96, 192, 465.9, 0.47),
    ("16B", 48, 6144, 32, 4, 1, 48, 192, 192, 489.1, 0.49),
    ("32B", 56, 7168, 48, 8, 1, 48, 384, 192, 459.6, 0.46),
    ("70B", 64, 8192, 84, 8, 2, 48, 768, 384, 419.7, 0.42),
    ("119B", 80, 10240, 92, 8, 4, 48, 1536, 768, 420.5, 0.43),
    ("177B", 96, 12288, 96, 8, 6, 48, 2304, 1152, 432.8, 0.44),
    ("314B", 128, 16384, 96, 8, 8, 48, 3072, 1536, 474.4, 0.48),
    ("462B", 144, 18432, 112, 8, 16, 48, 6144, 3072, 459.9, 0.47),
]

# What the README leaves unstated, assumed the same for every row.
ASSUMPTIONS = [
    "GPT flavour (LayerNorm, GELU MLP with ffn = 4h, learned positions, biases), untied input and output "
    "embeddings: with 12h² per layer and two 131,072 × h embeddings the parameter counts come out at the "
    "table's sizes (1.74B, 7.08B, 16.1B, 31.7B, 70.9B, 118.4B, 177.2B, 313.3B, 461.5B); a SwiGLU MLP of "
    "4h would not",
    "head_dim = hidden / heads (128 in every row); kv_heads = heads",
    "micro-batch 1 (the table gives the global batch only): microbatches = batch / DP",
    "flash attention, no activation recompute, bf16 weights; gradients accumulated and reduced in fp32 "
    "(Megatron r0.8.0 forces it under --bf16: MEGATRON_R080 megatron/training/arguments.py, \"bfloat16 "
    "requires gradient accumulation and all-reduce to be done in fp32\")",
    "the distributed optimizer (ZeRO 1), which --overlap-param-gather needs; the gradient buckets "
    "reduced during the backward (--overlap-grad-reduce), 25 MiB buckets, in place in one contiguous buffer as "
    "Megatron's DistributedDataParallel does (--contiguous-grad-buffer: no bucket waits for a staging slot)",
    "sequence parallelism wherever TP > 1, and TP communication overlapped with the GEMMs "
    "(--tp-comm-overlap, the README's flag, which needs it)",
    "1F1B without interleaving (the table gives no virtual stages)",
]


def model_file(name, heads, hidden, layers):
    return {
        "name": f"megatron-gpt-{name.lower()}",
        "source": f"{SOURCE}; unstated fields assumed as scripts/megatron_rows.py says",
        "flavour": "gpt",
        "layers": layers, "hidden": hidden, "heads": heads, "kv_heads": heads, "head_dim": hidden // heads,
        "ffn": 4 * hidden, "vocab": VOCAB, "max_seq": SEQ,
        "tied_embeddings": False, "qkv_bias": True, "sliding_window": None,
    }


def command(binary, model_path, row, report_path):
    _, _, _, _, tp, pp, dp, _, batch, _, _ = row
    cmd = [binary, "train", "--backend", "meta", "--model", model_path, "--dp", str(dp), "--tp", str(tp),
           "--pp", str(pp), "--seq", str(SEQ), "--mbs", "1", "--gbs", str(batch), "--attention", "flash",
           "--zero", "1", "--grad-dtype", "fp32", "--contiguous-grad-buffer", "--device", "h100-sxm",
           "--steps", "1", "--warmup", "0", "--quiet", "--json", report_path]
    if tp > 1:
        cmd[cmd.index("--seq"):cmd.index("--seq")] = ["--sp", "--tp-comm-overlap"]
    return cmd


def free_nvlink_profile(binary_dir_profiles, out):
    """A diagnostic network profile, not a published one: h100-sxm with the NVLink (intra-node) link
    made free (β × 1e6, α 1 ns). With TP = 8 every TP collective is intra-node and every DP and PP
    transfer crosses nodes, so this prices what Megatron's --tp-comm-overlap hides: the predicted step
    with TP communication taken off the critical path."""
    with open(os.path.join(binary_dir_profiles, "h100-sxm.network.json"), encoding="utf-8") as f:
        net = json.load(f)
    intra = net["links"]["intra_node"]
    intra["busbw_bytes_per_s"] = {"value": intra["busbw_bytes_per_s"]["value"] * 1e6,
                                  "source": "diagnostic: h100-sxm's NVLink busbw x 1e6 (TP communication free)"}
    intra["latency_seconds"] = {"value": 1e-9, "source": "diagnostic: TP communication free"}
    net["name"] = "h100-sxm-free-nvlink"
    net["notes"] = "diagnostic profile written by scripts/megatron_rows.py: not a description of any machine"
    path = os.path.join(out, "h100-sxm-free-nvlink.network.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(net, f, indent=1)
        f.write("\n")
    return path


def run_variant(cmd, extra, drop=()):
    """The prediction of cmd with extra options (an option already in cmd takes the new value) and without
    the flags in drop (a diagnostic beside the row): its MFU."""
    rpath = cmd[cmd.index("--json") + 1]
    vpath = rpath.replace(".report.json", ".variant.json")
    c = [x for x in cmd[:cmd.index("--json")] if x not in drop]
    extra = list(extra)
    for i in range(0, len(extra) - 1):
        if extra[i].startswith("--") and extra[i] in c and not extra[i + 1].startswith("--"):
            c[c.index(extra[i]) + 1] = extra[i + 1]
            extra[i] = extra[i + 1] = None
    c += ["--json", vpath] + [x for x in extra if x is not None]
    subprocess.run(c, check=True, stdout=subprocess.DEVNULL)
    with open(vpath, encoding="utf-8") as f:
        mfu = json.load(f)["summary"]["predicted"]["mfu"]
    os.remove(vpath)
    return mfu


def breakdown(report):
    """The critical stage's compute, exposed TP and DP communication and bubble, in ms."""
    p = report["prediction"]
    r = next(x for x in p["ranks"] if x["rank"] == p["critical_rank"])
    ex = r.get("exposed_comm_ms", {})
    return {"step": r["step_ms"], "compute": r["compute_ms"], "tp": ex.get("tp", 0.0), "dp": ex.get("dp", 0.0),
            "pp": ex.get("pp", 0.0), "bubble": r["bubble_ms"], "tail": r["tail_ms"]}


def ms(x):
    return f"{x / 1000:.2f} s" if x >= 1000 else f"{x:.1f} ms"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("gpuledger", help="the gpuledger binary")
    ap.add_argument("--out", default="results/megatron_rows", help="folder for model files, reports, README.md")
    ap.add_argument("--rows", help="comma-separated row names (default: all)")
    a = ap.parse_args()
    rows = ROWS if not a.rows else [r for r in ROWS if r[0] in a.rows.split(",")]
    os.makedirs(a.out, exist_ok=True)
    here = os.path.dirname(os.path.abspath(__file__))
    free = free_nvlink_profile(os.path.join(here, "..", "perf", "profiles"), a.out)
    lines = []
    diag = []
    cmds = []
    worst = 0.0
    for row in rows:
        name, heads, hidden, layers, tp, pp, dp, gpus, batch, tflops, mfu = row
        assert tp * pp * dp == gpus, name
        stem = f"gpt-{name.lower()}"
        mpath = os.path.join(a.out, stem + ".model.json")
        with open(mpath, "w", encoding="utf-8") as f:
            json.dump(model_file(name, heads, hidden, layers), f, indent=1)
            f.write("\n")
        rpath = os.path.join(a.out, stem + ".report.json")
        cmd = command(a.gpuledger, mpath, row, rpath)
        t0 = time.monotonic()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        wall = time.monotonic() - t0
        with open(rpath, encoding="utf-8") as f:
            rep = json.load(f)
        pred = rep["summary"]["predicted"]
        b = breakdown(rep)
        err = (pred["mfu"] - mfu) / mfu
        worst = max(worst, abs(err))
        layout = f"tp{tp} pp{pp} dp{dp}, {batch}×{SEQ}, {batch // dp} mb"
        # The published step: the same model FLOPs over the published MFU.
        pub_step = rep["prediction"]["model_flops_per_step"] / (gpus * H100_PEAK * mfu) * 1e3
        lines.append(
            f"| {name} | {layout} | {mfu:.0%} ({tflops:g} T) | {pred['mfu']:.1%} ({pred['mfu'] * H100_PEAK / 1e12:.0f} T)"
            f" | {err:+.1%} | {ms(pub_step)} | {ms(b['step'])} | {ms(b['compute'])} | {ms(b['tp'])} | {ms(b['dp'])}"
            f" | {ms(b['bubble'])} | {pred['hfu']:.1%} | {wall:.1f} s |")
        # Diagnostics beside the row (never the figure compared): TP communication free; the
        # interleaved schedule, vpp the largest divisor ≤ 8 of the layers per stage (1: none).
        no_tp = run_variant(cmd, ["--network-profile", free])
        compute_only = rep["prediction"]["model_flops_per_step"] / (gpus * H100_PEAK * b["compute"] / 1e3)
        per_stage = layers // pp
        vpp = max((v for v in range(1, 9) if per_stage % v == 0), default=1) if pp > 1 else 1
        with_vpp = run_variant(cmd, ["--vpp", str(vpp)]) if vpp > 1 else None
        both = run_variant(cmd, ["--network-profile", free, "--vpp", str(vpp)]) if vpp > 1 else no_tp
        # What each choice of the row moves: bf16 gradients (which Megatron r0.8.0 does not run under
        # --bf16), and the two prediction options off.
        bf16_grads = run_variant(cmd, ["--grad-dtype", "bf16"])
        no_tp_overlap = run_variant(cmd, [], drop=("--tp-comm-overlap",)) if tp > 1 else None
        staged = run_variant(cmd, [], drop=("--contiguous-grad-buffer",))
        diag.append(f"| {name} | {mfu:.0%} | {pred['mfu']:.1%} | {no_tp:.1%} ({(no_tp - mfu) / mfu:+.0%})"
                    f" | {'—' if with_vpp is None else f'{with_vpp:.1%} (vpp {vpp})'}"
                    f" | {both:.1%} ({(both - mfu) / mfu:+.0%}) | {bf16_grads:.1%}"
                    f" | {'—' if no_tp_overlap is None else f'{no_tp_overlap:.1%}'} | {staged:.1%} | {compute_only:.1%} |")
        shown = ["gpuledger" if c == a.gpuledger else c for c in cmd]
        cmds.append(f"{name}: " + " ".join(shown))
        print(lines[-1], flush=True)
    head = ("| row | layout (batch × seq, microbatches per replica) | published MFU (TFLOP/s per GPU) "
            "| predicted MFU (TFLOP/s) | error | published step | predicted step | compute | exposed tp | exposed dp | bubble "
            "| predicted HFU | prediction took |\n" + "|---" * 13 + "|")
    table = head + "\n" + "\n".join(lines)
    with open(os.path.join(a.out, "README.md"), "w", encoding="utf-8") as f:
        f.write("# Megatron-LM's published dense GPT runs, predicted\n\n")
        f.write(f"Written by `scripts/megatron_rows.py`. Published figures: {SOURCE}. Predictions on the "
                "published h100-sxm device and network profiles (`perf/profiles/`), one 1F1B step. "
                "The breakdown is the slowest simulated stage's (ms of its step); MFU counts the model "
                "FLOPs (`analytic/flops.h`), which for these models equal Megatron r0.8.0's "
                "`num_floating_point_operations` (full s² attention, no recompute).\n\n")
        f.write(table + "\n\n")
        f.write("Diagnostics (not the figure compared; h100-sxm-free-nvlink.network.json is written here and "
                "describes no machine): the predicted MFU with TP communication free (what --tp-comm-overlap "
                "hides at best), with the interleaved schedule, with both, with bf16 gradients (which Megatron r0.8.0 "
                "does not run under --bf16), without --tp-comm-overlap, without --contiguous-grad-buffer (the "
                "code's two staging slots), and the compute-only MFU (model "
                "FLOPs over the critical stage's compute time: no communication, no bubble).\n\n")
        f.write("| row | published | predicted | TP comm free (error) | interleaved | both (error) "
                "| bf16 gradients | no TP overlap | staged buckets | compute only |\n" + "|---" * 10 + "|\n" + "\n".join(diag) + "\n\n")
        f.write(f"Largest |error|: {worst:.1%}.\n\nAssumptions (the README leaves them unstated):\n\n")
        f.write("".join(f"- {x}\n" for x in ASSUMPTIONS))
        f.write("\nCommands (`gpuledger` is `build/bench/gpuledger`):\n\n```\n" + "\n".join(cmds) + "\n```\n")
    print(f"largest |error| {worst:.1%}; wrote {os.path.join(a.out, 'README.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
