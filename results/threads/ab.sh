#!/usr/bin/env bash
# The CPU thread policy, A/B in one run: the same training point alternately
# with each library's own pool (GPULEDGER_THREAD_POLICY=none) and with the
# OpenMP pool owning the cores (the default), ROUNDS times each; prints every
# run's median step (ms). A fixed --peak-flops skips the peak measurement.
set -euo pipefail
BIN="${GPULEDGER:-build/bench/gpuledger}"
ROUNDS="${ROUNDS:-3}"
OUT_JSON="$(mktemp)"
trap 'rm -f "$OUT_JSON"' EXIT
ARGS="train --model small-gpt --backend cpu --seq 128 --mbs 4 --microbatches 2 --steps 8 --warmup 2 --peak-flops 1e11 --quiet"
for r in $(seq "$ROUNDS"); do
  for policy in none openmp; do
    GPULEDGER_THREAD_POLICY=$policy $BIN $ARGS --json "$OUT_JSON"
    python3 -c "import json, sys; d=json.load(open(sys.argv[1])); print('round $r', '$policy'.ljust(6), 'median step %.1f ms' % d['summary']['median_step_ms'], '|', d['env']['device'])" "$OUT_JSON"
  done
done
