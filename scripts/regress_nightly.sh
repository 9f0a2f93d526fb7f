#!/usr/bin/env bash
# The nightly regression gate (docs/regress.md): runs a fixed suite of points,
# each timed point --repeat times, gates every point on its baseline with
# `gpuledger regress` (loss per step, peak bytes per account per rank and comm
# bytes per collective exact, MFU and tokens/s by the median of the repetitions
# against the baseline's spread), appends one history line per point, and
# exits 1 naming every point that regressed and what changed.
#
#   scripts/regress_nightly.sh OUT_DIR            gate (reports in OUT_DIR/reports/<UTC time>/,
#                                                 history in OUT_DIR/history.jsonl, plots in OUT_DIR/plots/)
#   scripts/regress_nightly.sh OUT_DIR --update   record the baselines from tonight's run instead
#
# Environment:
#   GPULEDGER=PATH   a prebuilt binary (default: build one with scripts/build.sh into $BUILD_DIR)
#   SUITE=cpu|gpu|meta   which points (default cpu); meta is the bytes-only point alone (quick)
#   BASELINES=DIR    the baselines (default results/baselines/$SUITE)
#   REPEAT=N         repetitions of each timed point (default 5: the least for a U test is 4)
#   PERF_TOL=F       MFU and tokens/s may fall by this fraction, or the baseline's spread (default 0.05)
#   NIGHTLY_INJECT=mfu|loss|bytes   test hook: edit tonight's reports as that regression would
#                    (scripts/regress_inject.py) before gating them; the gate must then fail
#   PLOT=0           no plots (default: plot the history when /usr/bin/python3 has matplotlib)
# Exit: 0 no regression; 1 a regression or a point that failed its own checks; 2 bad setup.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${1:?usage: scripts/regress_nightly.sh OUT_DIR [--update]}"
MODE="${2:-gate}"
SUITE="${SUITE:-cpu}"
BASE="${BASELINES:-$ROOT/results/baselines/$SUITE}"
REPEAT="${REPEAT:-5}"
PERF_TOL="${PERF_TOL:-0.05}"
if [ -z "${GPULEDGER:-}" ]; then
  BUILD_DIR="${BUILD_DIR:-$ROOT/build}" "$ROOT/scripts/build.sh" >/dev/null
  GPULEDGER="${BUILD_DIR:-$ROOT/build}/bench/gpuledger"
fi
[ -x "$GPULEDGER" ] || { echo "regress_nightly: GPULEDGER=$GPULEDGER is not an executable" >&2; exit 2; }

# name | timed (repeat) or bytes (one run: the meta backend's time is bookkeeping) | arguments.
# Every point is deterministic in bytes, FLOPs and loss.
META_POINT="train-llama2-7b-meta|bytes|train --model llama2-7b --backend meta --seq 4096 --mbs 1 --steps 1 --warmup 0 --attention flash --dp 8 --zero 1 --world 8"
case "$SUITE" in
  # cpu: a few minutes on a 2-core machine; steps of about half a second and ten timed steps a
  # repetition, so that a repetition's median step is not one scheduler hiccup; gpu: the performance suite.
  cpu) POINTS=(
      "train-small-gpt-cpu|timed|train --model small-gpt --backend cpu --seq 128 --mbs 4 --microbatches 2 --steps 12 --warmup 2"
      "train-small-llama-cpu-flash-selective|timed|train --model small-llama --backend cpu --seq 128 --mbs 4 --steps 12 --warmup 2 --attention flash --recompute selective"
      "$META_POINT") ;;
  gpu) POINTS=(
      "train-llama2-7b-4l-cuda-bf16|timed|train --model llama2-7b --layers 4 --backend cuda --dtype bf16 --seq 2048 --mbs 2 --steps 6 --warmup 2 --attention flash"
      "train-small-llama-cuda-fp32-selective|timed|train --model small-llama --backend cuda --seq 512 --mbs 4 --steps 6 --warmup 2 --attention flash --recompute selective"
      "$META_POINT") ;;
  meta) POINTS=("$META_POINT") ;;
  *) echo "regress_nightly: SUITE=$SUITE: cpu, gpu or meta" >&2; exit 2 ;;
esac

NIGHT="$(date -u +%Y%m%dT%H%M%SZ)"
REPORTS="$OUT/reports/$NIGHT"
mkdir -p "$REPORTS" "$BASE"
HISTORY="$OUT/history.jsonl"
failed=()
for p in "${POINTS[@]}"; do
  IFS='|' read -r name how args <<<"$p"
  reps=1 warm=0
  # A timed point first runs once untimed: a process's first run pays its page faults and cold caches.
  [ "$how" = timed ] && reps="$REPEAT" warm=1
  report="$REPORTS/$name.json"
  # shellcheck disable=SC2086
  if ! "$GPULEDGER" $args --repeat "$reps" --repeat-warmup "$warm" --quiet --json "$report"; then
    failed+=("$name: the run failed or failed its own checks (see $report)")
    continue
  fi
  if [ "$MODE" = --update ]; then
    cp "$report" "$BASE/$name.json"
    echo "baseline written: $BASE/$name.json"
    continue
  fi
  if [ -n "${NIGHTLY_INJECT:-}" ]; then
    python3 "$ROOT/scripts/regress_inject.py" "$NIGHTLY_INJECT" "$report"
  fi
  if [ ! -f "$BASE/$name.json" ]; then
    failed+=("$name: no baseline in $BASE (record with: scripts/regress_nightly.sh OUT_DIR --update)")
    continue
  fi
  set +e
  "$GPULEDGER" regress "$report" --baseline "$BASE/$name.json" --perf-tol "$PERF_TOL" --point "$name" \
    --history "$HISTORY" --json "$REPORTS/$name.regress.json" >"$REPORTS/$name.regress.txt" 2>&1
  rc=$?
  set -e
  grep -E '^(REGRESSED|# note)' "$REPORTS/$name.regress.txt" || true
  case $rc in
    0) echo "ok: $name" ;;
    1) failed+=("$name: $(grep -c '^REGRESSED' "$REPORTS/$name.regress.txt") regression(s): $(grep '^REGRESSED' "$REPORTS/$name.regress.txt" | sed "s/^REGRESSED $name: //" | paste -sd ';' -)") ;;
    *) failed+=("$name: regress could not compare (exit $rc): $(tail -3 "$REPORTS/$name.regress.txt" | paste -sd ' ' -)") ;;
  esac
done

if [ "$MODE" != --update ] && [ "${PLOT:-1}" != 0 ] && [ -s "$HISTORY" ] && /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  /usr/bin/python3 "$ROOT/scripts/plot.py" --history "$HISTORY" --out "$OUT/plots" >/dev/null ||
    echo "regress_nightly: plotting the history failed (the gate's verdict stands)" >&2
fi

if [ ${#failed[@]} -gt 0 ]; then
  echo "NIGHTLY FAILED ($NIGHT, reports in $REPORTS):"
  printf '  %s\n' "${failed[@]}"
  exit 1
fi
echo "nightly ok ($NIGHT): ${#POINTS[@]} points, reports in $REPORTS"
