#!/usr/bin/env bash
# What the BLAS kernel family costs: `gpuledger peak --quick` (fp32 sgemm of
# 1024² and 2048², median of 5: the peak train and infer measure) with OpenBLAS
# left to pick its kernels for this CPU, then forced to each named family with OPENBLAS_CORETYPE — the
# SSE3 "Prescott" family is what OpenBLAS 0.3.21 falls back to on a CPU model
# it does not list. gpuledger warns when the family is narrower than the CPU
# (kernels/cpu/blas_core.h) and, when the variable is unset, re-executes itself
# with the matching family; a user's own setting is kept (and warned about),
# which is what lets this script force Prescott.
#
# Usage: results/cpu/blas_core/run.sh BIN_DIR   (BIN_DIR holds gpuledger)
# Writes out/peak-<core>.json and out/stderr-<core>.txt; prints the table (run.log).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
BIN="$1"
OUT="$HERE/out"
mkdir -p "$OUT"
export OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=1
echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=1"
echo "# load: $(uptime | sed 's/.*load average: //')"
CORES="${CORES:-auto Prescott Sandybridge Haswell Zen}"
ROUNDS="${ROUNDS:-3}"
# The families take turns within a round, so each round's figures share one spell of machine load.
for round in $(seq 1 "$ROUNDS"); do
  for core in $CORES; do
    if [ "$core" = auto ]; then
      env -u OPENBLAS_CORETYPE "$BIN/gpuledger" peak --backend cpu --dtypes fp32 --quick --reps 5 \
        --json "$OUT/peak-$core-r$round.json" >/dev/null 2>"$OUT/stderr-$core.txt"
    else
      OPENBLAS_CORETYPE=$core "$BIN/gpuledger" peak --backend cpu --dtypes fp32 --quick --reps 5 \
        --json "$OUT/peak-$core-r$round.json" >/dev/null 2>"$OUT/stderr-$core.txt"
    fi
  done
  echo "# $(date -u +%T) round $round done; load: $(uptime | sed 's/.*load average: //')"
done
python3 - "$OUT" "$ROUNDS" $CORES <<'PY'
import json, statistics, sys, pathlib
out, rounds, cores = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
best = {c: [json.load(open(out / f"peak-{c}-r{r}.json"))["summary"]["peak_flops_fp32"] for r in range(1, rounds + 1)]
        for c in cores}
print(f"{'OPENBLAS_CORETYPE':>18} {'core the BLAS ran':>18} {'GFLOP/s (median)':>17} {'per round':>20} {'vs auto':>8}")
for c in cores:
    corename = json.load(open(out / f"peak-{c}-r1.json"))["env"]["fingerprint"]["blas"]["corename"]
    m = statistics.median(best[c])
    ratios = [b / a for a, b in zip(best["auto"], best[c])]  # within each round
    print(f"{c:>18} {corename:>18} {m/1e9:>17.1f} {' '.join(f'{b/1e9:.1f}' for b in best[c]):>20} "
          f"{statistics.median(ratios):>7.2f}x")
print("the ratio is the median over rounds of (this family / auto) within a round")
for c in cores:
    warn = open(out / f"stderr-{c}.txt").read().strip()
    print(f"stderr with OPENBLAS_CORETYPE={c}: {warn or '(nothing)'}")
PY
