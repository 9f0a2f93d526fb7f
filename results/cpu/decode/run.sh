#!/usr/bin/env bash
# CPU decode throughput by batch: the 2-layer llama3-8b-shaped model
# (llama3-8b-2l.json, bf16 weights, random) served by `gpuledger infer` at
# batch 1, 8 and 16, each REPS times (batches interleaved within a repetition,
# so each sees the same spell of machine load), medians taken; the machine's
# read bandwidth (read_bw.cpp: a vectorized sum over 1 GiB, 32× the L3)
# measured before and after the infer runs, and the load (`uptime`) logged
# around each run, since this machine is shared.
#
# Usage: REPS=3 results/cpu/decode/run.sh BIN_DIR
#   GEN_LEN=N tokens generated per request (default 24: 23 decode steps, so
#   that one slow step — a page fault, a time slice lost — weighs little).
#   BIN_DIR holds the gpuledger to measure (build/bench/gpuledger).
#   REP_FIRST=N starts at repetition N and SKIP="b8-r2 …" skips runs (to
#   complete an interrupted run; the summary reads every repetition's report).
# Threads: OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=1 (the project's thread
# policy: OpenMP owns the cores, the BLAS runs one thread per call).
# Writes out/ (JSON reports) and prints the log (run.log is this output).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
BIN="$1"
REPS="${REPS:-3}"
GEN_LEN="${GEN_LEN:-24}"
BATCHES="${BATCHES:-1 8 16}"
OUT="$HERE/out"
mkdir -p "$OUT"
export OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=1
MODEL="$HERE/llama3-8b-2l.json"

echo "# $(date -u +%FT%TZ) $(uname -n) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=1; reps $REPS; batches $BATCHES; gen-len $GEN_LEN; GPULEDGER_BF16_DOT=${GPULEDGER_BF16_DOT:-unset}"
echo "# load: $(uptime)"
g++ -O3 -mavx2 -fopenmp "$HERE/read_bw.cpp" -o "$OUT/read_bw"
"$OUT/read_bw" | tee "$OUT/read_bw.txt"

# Exit 1 with a report written is a failed check, kept and named: under a varying load the sgemm peak
# that infer measures at its start can fall below what decode then achieves (decode.mfu <= 1).
for rep in $(seq "${REP_FIRST:-1}" "$REPS"); do
  for batch in $BATCHES; do
    [ -n "${SKIP:-}" ] && [[ " $SKIP " == *" b$batch-r$rep "* ]] && continue
    rc=0
    "$BIN/gpuledger" infer --model "$MODEL" --backend cpu --device-memory 6Gi --requests "$batch" \
      --max-batch "$batch" --prompt-len 8 --gen-len "$GEN_LEN" --max-num-batched-tokens 64 --max-model-len 64 \
      --json "$OUT/infer-b$batch-r$rep.json" >/dev/null 2>&1 || rc=$?
    [ "$rc" -eq 0 ] || [ "$rc" -eq 1 -a -f "$OUT/infer-b$batch-r$rep.json" ] || exit "$rc"
    failed=$(python3 -c "import json,sys; print(' '.join(c['name'] for c in json.load(open(sys.argv[1]))['checks'] if not c['ok']))" "$OUT/infer-b$batch-r$rep.json")
    echo "# $(date -u +%T) batch $batch rep $rep done (exit $rc${failed:+, failed: $failed}); load: $(uptime | sed 's/.*load average: //')"
  done
done
"$OUT/read_bw" | tee -a "$OUT/read_bw.txt"
echo "# load: $(uptime)"

python3 - "$OUT" "$REPS" "$BATCHES" <<'PY'
import json, statistics, sys, pathlib
out, reps, batches = pathlib.Path(sys.argv[1]), int(sys.argv[2]), [int(b) for b in sys.argv[3].split()]
bw = statistics.median(float(l.split()[1]) for l in open(out / "read_bw.txt")) * 1e9
print(f"read bandwidth (median of the two read_bw runs' medians): {bw/1e9:.2f} GB/s")
fp = json.load(open(out / f"infer-b{batches[0]}-r1.json"))["env"]["fingerprint"]
print("fingerprint:", fp["cpu_model"], fp["isa"], fp["blas"]["config"], fp["threads"]["policy"])
print(f"{'batch':>5} {'tok/s (median)':>15} {'per rep':>24} {'GB read/step':>13} {'GB/s':>7} {'of read bw':>10} {'GFLOP/s':>8}")
med = {}
for batch in batches:
    ds = [json.load(open(out / f"infer-b{batch}-r{r}.json"))["summary"]["decode"] for r in range(1, reps + 1)]
    tps = [d["tokens_per_s"] for d in ds]
    m = statistics.median_low(tps)  # a repetition's own figure, also for an even count
    d = ds[tps.index(m)]
    step_s = d["seconds"] / d["steps"]
    bps = d["bytes_per_step"] / step_s
    med[batch] = m
    print(f"{batch:>5} {m:>15.3f} {' '.join(f'{t:.3f}' for t in tps):>24} "
          f"{d['bytes_per_step']/1e9:>13.3f} {bps/1e9:>7.2f} {100*bps/bw:>9.1f}% {d['flops']/d['seconds']/1e9:>8.2f}")
for batch in batches[1:]:
    print(f"batch {batch} / batch {batches[0]} (medians of this run): {med[batch]/med[batches[0]]:.2f}x")
PY
