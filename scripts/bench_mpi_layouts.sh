#!/usr/bin/env bash
# The 4-rank CPU layouts of results/README.md ("Four MPI ranks on the CPU"): a
# gpt2-shaped model (GPT-2 small's layer and vocabulary, 4 layers) trained
# under mpirun -np 4 as dp4 (with and without the DP overlap), tp2×dp2 with
# SP, pp2×dp2 1F1B and dp4 ZeRO-3, one report each in OUTDIR, then a table
# of the step split, the checks and rank 0's largest collective with its
# busbw (nccl-tests' factors). Usage: scripts/bench_mpi_layouts.sh [OUTDIR]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${1:-$ROOT/results/mpi}"
GL="${GPULEDGER:-$ROOT/build/bench/gpuledger}"
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
GPT2=(--model gpt2 --layers 4 --seq 128 --gbs 8 --mbs 2 --steps 3 --warmup 1 --quiet)
run() {
  local name=$1; shift
  echo "mpirun -np 4 gpuledger train ${GPT2[*]} $* --json $OUT/$name.json" >&2
  mpirun -np 4 --oversubscribe "$GL" train "${GPT2[@]}" "$@" --json "$OUT/$name.json" >/dev/null
}
if [ -z "${TABLE_ONLY:-}" ]; then   # TABLE_ONLY=1: only the table of reports already in OUTDIR
  run train-gpt2-4l-dp4 --dp 4
  run train-gpt2-4l-dp4-no-overlap --dp 4 --no-overlap-grad-reduce
  run train-gpt2-4l-tp2-dp2-sp --tp 2 --dp 2 --sp
  run train-gpt2-4l-pp2-dp2-1f1b --pp 2 --dp 2 --schedule 1f1b
  run train-gpt2-4l-dp4-zero3 --dp 4 --zero 3
fi
python3 - "$OUT" <<'PY'
import json, sys, os
out = sys.argv[1]
busbw_factor = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
                "reduce_scatter": lambda n: (n - 1) / n}
print("| layout | median step | compute | exposed comm | bubble est. | tokens/s | checks | largest collective: bytes/step, busbw |")
print("|---|---|---|---|---|---|---|---|")
for name in ["train-gpt2-4l-dp4", "train-gpt2-4l-dp4-no-overlap", "train-gpt2-4l-tp2-dp2-sp",
             "train-gpt2-4l-pp2-dp2-1f1b", "train-gpt2-4l-dp4-zero3"]:
    d = json.load(open(os.path.join(out, name + ".json")))
    s = d["summary"]; sp = s["step_split_ms"]; steps = s["steps_completed"]
    step_s = s["median_step_ms"] / 1e3
    ok = sum(1 for c in d["checks"] if c.get("ok")); n = len(d["checks"])
    r0 = d["ranks"][0]; world = d["env"]["world"]
    key, c = max(r0["comm"].items(), key=lambda kv: kv[1]["bytes"])
    kind, group = key.split("@")
    size = d["config"]["layout"][group] if group in d["config"].get("layout", {}) else world
    algbw = c["bytes"] / c["seconds"] if c["seconds"] > 0 else 0
    busbw = algbw * busbw_factor.get(kind, lambda n: 1.0)(size)
    print(f"| {name[6:]} | {step_s:.2f} s | {sp['compute']/1e3:.2f} s | {sp['exposed_comm']/1e3:.2f} s | "
          f"{sp['pipeline_bubble_estimate'] / 1e3:.2f} s | {s['tokens_per_s']:.1f} | {ok}/{n} | "
          f"{key}: {c['bytes'] / steps / 2**20:.1f} MiB, {busbw / 1e6:.0f} MB/s |")
PY
