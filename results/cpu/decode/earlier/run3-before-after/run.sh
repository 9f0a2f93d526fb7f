#!/usr/bin/env bash
# CPU decode before/after: the 2-layer llama3-8b-shaped model (llama3-8b-2l.json,
# bf16 weights, random) served by `gpuledger infer` at batch 1 and 8, each
# configuration run REPS times with the two binaries interleaved (so both see
# the same machine load), the medians compared; the machine's read bandwidth
# (read_bw.cpp: a vectorized sum over 1 GiB, 32× the L3) measured in the same
# run; the decode GEMMs of llama3-8b through gpl_micro, before and after.
#
# Usage: results/cpu/decode/run.sh BEFORE_DIR AFTER_DIR
#   each DIR holds a gpuledger and a gpl_micro built from the commit to compare
#   (build/bench/gpuledger, build/bench/micro/gpl_micro).
# Threads: OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=1 (the project's thread
# policy: OpenMP owns the cores, the BLAS runs one thread per call).
# Writes out/ (JSON reports) and prints the log (run.log is this output).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
DEC="$(cd "$HERE/../.." && pwd)"  # results/cpu/decode: the model and read_bw.cpp (this run was kept in earlier/)
BEFORE="$1" AFTER="$2"
REPS="${REPS:-1}"
OUT="$HERE/out"
mkdir -p "$OUT"
export OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=1
export GPULEDGER_PRESETS="$DEC/../../../models/presets"  # gpl_micro's layer shapes
MODEL="$DEC/llama3-8b-2l.json"

echo "# $(date -u +%FT%TZ) $(uname -n) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=1; reps $REPS"
g++ -O3 -mavx2 -fopenmp "$DEC/read_bw.cpp" -o "$OUT/read_bw"
"$OUT/read_bw" | tee "$OUT/read_bw.txt"

infer() {  # BIN BATCH JSON
  "$1" infer --model "$MODEL" --backend cpu --device-memory 6Gi --requests "$2" --max-batch "$2" \
    --prompt-len 8 --gen-len 6 --max-num-batched-tokens 64 --max-model-len 64 --json "$3" >/dev/null
}
for rep in $(seq 1 "$REPS"); do
  for batch in 1 8; do
    for which in before after; do
      dir="$BEFORE"; [ "$which" = after ] && dir="$AFTER"
      infer "$dir/gpuledger" "$batch" "$OUT/infer-$which-b$batch-r$rep.json"
    done
  done
done
"$OUT/read_bw" | tee -a "$OUT/read_bw.txt"

python3 - "$OUT" "$REPS" <<'PY'
import json, statistics, sys, pathlib
out, reps = pathlib.Path(sys.argv[1]), int(sys.argv[2])
bw = statistics.median(float(l.split()[1]) for l in open(out / "read_bw.txt")) * 1e9
print(f"read bandwidth (median of the two read_bw runs' medians): {bw/1e9:.2f} GB/s")
fp = json.load(open(out / "infer-after-b1-r1.json"))["env"]["fingerprint"]
print("fingerprint:", fp["cpu_model"], fp["isa"], fp["blas"]["config"], fp["threads"]["policy"])
print(f"{'batch':>5} {'binary':>7} {'tok/s (median)':>15} {'per rep':>24} {'GB read/step':>13} {'GB/s':>7} {'of read bw':>10}")
med = {}
for batch in (1, 8):
    for which in ("before", "after"):
        ds = [json.load(open(out / f"infer-{which}-b{batch}-r{r}.json"))["summary"]["decode"] for r in range(1, reps + 1)]
        tps = [d["tokens_per_s"] for d in ds]
        m = statistics.median(tps)
        i = tps.index(m)
        d = ds[i]
        bps = d["bytes_per_step"] / (d["seconds"] / d["steps"])
        med[(batch, which)] = m
        print(f"{batch:>5} {which:>7} {m:>15.3f} {' '.join(f'{t:.3f}' for t in tps):>24} "
              f"{d['bytes_per_step']/1e9:>13.3f} {bps/1e9:>7.2f} {100*bps/bw:>9.1f}%")
    print(f"batch {batch}: after / before = {med[(batch,'after')]/med[(batch,'before')]:.1f}x")
PY

for which in before after; do
  dir="$BEFORE"; [ "$which" = after ] && dir="$AFTER"
  "$dir/gpl_micro" --gpl_backends=cpu --gpl_presets=llama3-8b --gpl_seqs=1,8,64 --gpl_dtypes=bf16 --gpl_peak=none \
    --benchmark_filter='gemm/cpu/llama3-8b/(qkv|down)/fwd/bf16/seq:(1|8|64)/' \
    --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
    --benchmark_format=json --benchmark_out="$OUT/micro-gemm-$which.json" >/dev/null
done
python3 - "$OUT" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
def medians(which):
    d = json.load(open(out / f"micro-gemm-{which}.json"))
    return {b["run_name"]: b["real_time"] for b in d["benchmarks"] if b.get("aggregate_name") == "median"}
b, a = medians("before"), medians("after")
print(f"{'gemm (median ms)':<52} {'before':>10} {'after':>10} {'speedup':>8}")
for name in b:
    print(f"{name:<52} {b[name]:>10.2f} {a[name]:>10.2f} {b[name]/a[name]:>7.1f}x")
PY
