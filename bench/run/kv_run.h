// `kv` as a typed run: a request (the resolved configuration, the cache, the
// context and requests, the serving memory rule) → run_kv → a record per rank
// of the analytic KV cache: bytes per token, the reservation, capacity under
// vLLM's memory rule, and the decode roofline. Formulas: docs/formulas/kv.md.
// The request and record types: bench/record/kv_record.h.
#pragma once
#include <cstdint>

#include "bench/record/kv_record.h"
#include "core/resolved_config.h"

namespace gpuledger::run {

// The transient activation peak of one inference forward over `tokens`
// tokens (what vLLM's profiling run measures before sizing the pool) on one
// rank of `c`'s layout with its attention: analytic::prefill_activation_bytes,
// the figure `infer` checks its profiled peak against.
int64_t inference_activation_bytes(const ResolvedConfig& c, int64_t tokens);

// Throws LayoutError when a contiguous cache cannot hold the context.
KvRecord run_kv(const KvRequest& request);

}  // namespace gpuledger::run
