#!/usr/bin/env bash
# Nightly regression: runs fixed points and compares each with its baseline in
# results/baselines/ (gpuledger regress: peak bytes may not grow at all; MFU and
# tokens/s may not fall by more than MFU_TOL, default 25% — CPU timings on a
# shared machine are noisy). Exit 1 on any regression or failed check.
#   scripts/regress_nightly.sh            compare
#   scripts/regress_nightly.sh --update   write new baselines (commit them with the machine noted)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}" "$ROOT/scripts/build.sh" >/dev/null
GL="${BUILD_DIR:-$ROOT/build}/bench/gpuledger"
BASE="$ROOT/results/baselines"
NOW="$(mktemp -d)"
MFU_TOL="${MFU_TOL:-0.25}"
mkdir -p "$BASE"

# name | arguments (each point must be deterministic in bytes and FLOPs)
POINTS=(
  "train-small-gpt-cpu|train --model small-gpt --backend cpu --seq 128 --mbs 4 --microbatches 2 --steps 4 --warmup 1"
  "train-small-llama-cpu-flash-selective|train --model small-llama --backend cpu --seq 128 --mbs 4 --steps 4 --warmup 1 --attention flash --recompute selective"
  "train-llama2-7b-meta|train --model llama2-7b --backend meta --seq 4096 --mbs 1 --steps 1 --warmup 0 --attention flash"
)

status=0
for p in "${POINTS[@]}"; do
  name="${p%%|*}"; args="${p#*|}"
  # shellcheck disable=SC2086
  "$GL" $args --quiet --json "$NOW/$name.json" || { echo "FAIL: $name did not pass its own checks"; status=1; continue; }
  if [ "${1:-}" = "--update" ]; then
    cp "$NOW/$name.json" "$BASE/$name.json"; echo "baseline written: $BASE/$name.json"
  elif [ -f "$BASE/$name.json" ]; then
    "$GL" regress "$NOW/$name.json" --baseline "$BASE/$name.json" --mfu-tol "$MFU_TOL" --bytes-tol 0 \
      || { echo "REGRESSION: $name"; status=1; }
  else
    echo "no baseline for $name (run with --update)"; status=1
  fi
done

# Microbenchmarks: a small fixed subset (gpt2 layer shapes at seq 1024, fp32; 5
# repetitions). Each night's JSON is kept in results/micro/history/ and compared
# with the previous one by scripts/micro_compare.py (Mann-Whitney U on the
# repetitions). Reported only, unless MICRO_FAIL=1: timings here are noisy.
MICRO="${BUILD_DIR:-$ROOT/build}/bench/micro/gpl_micro"
if [ -x "$MICRO" ]; then
  HIST="$ROOT/results/micro/history"
  mkdir -p "$HIST"
  prev="$(ls "$HIST"/*.json 2>/dev/null | tail -1 || true)"
  cur="$HIST/$(date -u +%Y%m%dT%H%M%SZ).json"
  "$MICRO" --gpl_backends=cpu --gpl_presets=gpt2 --gpl_seqs=1024 --gpl_dtypes=fp32 --gpl_adamw_params=10M \
    --gpl_peak=none '--benchmark_filter=^(gemm/cpu/gpt2/(qkv|up)/fwd|attention/cpu/gpt2/flash/fwd|norm/cpu/gpt2/layernorm/fwd|adamw/cpu/fp32)/' \
    --benchmark_repetitions=5 --benchmark_min_time=0.1 --benchmark_out="$cur" --benchmark_out_format=json >/dev/null
  if [ -n "$prev" ]; then
    python3 "$ROOT/scripts/micro_compare.py" "$prev" "$cur" ${MICRO_FAIL:+--fail-on-slower} \
      || { echo "MICRO: slower than $prev"; status=1; }
  fi
fi

rm -rf "$NOW"
exit $status
