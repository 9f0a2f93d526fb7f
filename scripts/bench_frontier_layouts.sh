#!/usr/bin/env bash
# The frontier layouts on 4 CPU ranks (results/frontier/README.md): expert
# parallelism on an 8-expert MoE (results/frontier/small-moe.json; with ZeRO 1,
# and ZeRO 3 under full recompute, the experts sharded over edp), an
# interleaved pipeline and context parallelism on small-llama, each beside the
# plain data-parallel run of the same global batch (fp32, seed fixed): one
# report each in OUTDIR, then a table of the step, the checks, the layout's own
# traffic and the loss against the data-parallel run's.
# Usage: scripts/bench_frontier_layouts.sh [OUTDIR]   (TABLE_ONLY=1: the table of reports already there)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${1:-$ROOT/results/frontier}"
GL="${GPULEDGER:-$ROOT/build/bench/gpuledger}"
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
COMMON=(--seq 128 --gbs 8 --mbs 2 --dtype fp32 --attention flash --steps 4 --warmup 1 --quiet)
MOE=(--model "$ROOT/results/frontier/small-moe.json")
DENSE=(--model small-llama)
run() {
  local name=$1; shift
  echo "# $(date -u +%T) mpirun -np 4 gpuledger train ${COMMON[*]} $* --json $OUT/$name.json" >&2
  local rc=0
  mpirun -np 4 --oversubscribe "$GL" train "${COMMON[@]}" "$@" --json "$OUT/$name.json" >/dev/null || rc=$?
  [ "$rc" -eq 0 ] || echo "# $name exited $rc" >&2
}
if [ -z "${TABLE_ONLY:-}" ]; then
  run moe-dp4 "${MOE[@]}" --dp 4
  run moe-dp4-ep2 "${MOE[@]}" --dp 4 --ep 2
  run moe-dp4-ep4 "${MOE[@]}" --dp 4 --ep 4
  run moe-pp2-dp2-ep2 "${MOE[@]}" --pp 2 --dp 2 --ep 2
  run moe-dp4-ep2-zero1 "${MOE[@]}" --dp 4 --ep 2 --zero 1
  run moe-dp4-ep2-zero3-full "${MOE[@]}" --dp 4 --ep 2 --zero 3 --recompute full
  run dense-dp4 "${DENSE[@]}" --dp 4
  run dense-pp2-dp2 "${DENSE[@]}" --pp 2 --dp 2
  run dense-pp2-vpp2-dp2 "${DENSE[@]}" --pp 2 --vpp 2 --dp 2
  run dense-cp2-dp2 "${DENSE[@]}" --cp 2 --dp 2
  run dense-cp4 "${DENSE[@]}" --cp 4
fi
python3 - "$OUT" <<'PY'
import json, sys, os
out = sys.argv[1]
rows = [("moe-dp4", "moe-dp4"), ("moe-dp4-ep2", "moe-dp4"), ("moe-dp4-ep4", "moe-dp4"), ("moe-pp2-dp2-ep2", "moe-dp4"),
        ("moe-dp4-ep2-zero1", "moe-dp4"), ("moe-dp4-ep2-zero3-full", "moe-dp4"),
        ("dense-dp4", "dense-dp4"), ("dense-pp2-dp2", "dense-dp4"), ("dense-pp2-vpp2-dp2", "dense-dp4"),
        ("dense-cp2-dp2", "dense-dp4"), ("dense-cp4", "dense-dp4")]
def load(name):
    p = os.path.join(out, name + ".json")
    return json.load(open(p)) if os.path.exists(p) else None
print("| layout | median step | tokens/s | checks | rank 0's layout traffic per step (calls, bytes) | last loss | vs the dp4 run |")
print("|---|---|---|---|---|---|---|")
for name, base in rows:
    d = load(name)
    if d is None:
        print(f"| {name} | not run | | | | | |"); continue
    s = d["summary"]; steps = s["steps_completed"]
    ok = sum(1 for c in d["checks"] if c.get("ok")); n = len(d["checks"])
    r0 = d["ranks"][0]
    own = [(k, c) for k, c in r0["comm"].items() if k.split("@")[1] in ("ep", "edp", "pp", "cp")]
    traffic = ", ".join(f"{k}: {c['calls'] // steps}, {c['bytes'] / steps / 2**20:.2f} MiB" for k, c in sorted(own)) or "—"
    loss = s["loss"][-1]
    b = load(base)
    ref = b["summary"]["loss"][-1] if b else None
    rel = f"{(loss - ref) / ref:+.1e}" if ref and name != base else "—"
    print(f"| {name} | {s['median_step_ms'] / 1e3:.3f} s | {s['tokens_per_s']:.0f} | {ok}/{n} | {traffic} | {loss:.6f} | {rel} |")
PY
