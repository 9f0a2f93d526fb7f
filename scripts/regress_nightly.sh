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
rm -rf "$NOW"
exit $status
