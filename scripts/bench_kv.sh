#!/usr/bin/env bash
# The KV-cache benchmark: on a long-tailed request-length distribution, the fraction of
# reserved KV memory that holds real tokens — contiguous vs paged caches (the
# PagedAttention paper reports 20–38% for contiguous systems and ~96% for
# paged) — and decode bandwidth utilization on this CPU. The trace is drawn
# from log-normal prompt and output lengths (seeded), capped to the model's
# context. Writes results/kv/*.json and prints the figures.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# GPULEDGER_BIN: a gpuledger already built (nothing is built then); else scripts/build.sh builds all.
if [ -n "${GPULEDGER_BIN:-}" ]; then
  GL="$GPULEDGER_BIN"
else
  BUILD_DIR="${BUILD_DIR:-$ROOT/build}" "$ROOT/scripts/build.sh" >/dev/null
  GL="${BUILD_DIR:-$ROOT/build}/bench/gpuledger"
fi
OUT="$ROOT/results/kv"
mkdir -p "$OUT"
python3 - "$OUT/trace-longtail.jsonl" <<'PY'
import json, math, random, sys
rng = random.Random(20261130)
with open(sys.argv[1], "w") as f:
    for i in range(96):
        # log-normal lengths: median ~48 prompt tokens, ~32 output tokens, long tails
        p = max(4, int(rng.lognormvariate(math.log(48), 0.9)))
        g = max(2, int(rng.lognormvariate(math.log(32), 0.9)))
        p = min(p, 200)
        g = min(g, 256 - p)
        f.write(json.dumps({"prompt_len": p, "gen_len": g, "arrival": i // 4}) + "\n")
PY
for kv in contiguous paged; do
  "$GL" infer --model small-llama --backend cpu --device-memory 2Gi --trace "$OUT/trace-longtail.jsonl" \
      --max-batch 32 --max-model-len 256 --kv "$kv" --json "$OUT/infer-small-llama-longtail-$kv.json" >/dev/null
done
python3 - "$OUT" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
for kv in ("contiguous", "paged"):
    d = json.load(open(out / f"infer-small-llama-longtail-{kv}.json"))
    m = d["ranks"][0]["measured"]["kv"]
    s = d["summary"]
    frac = m["peak_token_bytes"] / m["peak_assigned_bytes"]
    print(f"{kv:>10}: tokens hold {100*frac:.1f}% of the KV bytes assigned at peak "
          f"(token {m['peak_token_bytes']:,} / assigned {m['peak_assigned_bytes']:,}); "
          f"checks {sum(c['ok'] for c in d['checks'])}/{len(d['checks'])}; "
          + ", ".join(f"{k} {v}" for k, v in s.items() if 'bandwidth' in k or 'decode_tokens' in k))
PY
