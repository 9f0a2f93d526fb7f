// `kv` as a typed run: a request (the resolved configuration, the cache, the
// context and requests, the serving memory rule) → run_kv → a record per rank
// of the analytic KV cache: bytes per token, the reservation, capacity under
// vLLM's memory rule, and the decode roofline. Formulas: docs/formulas/kv.md.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "analytic/kv_cache.h"
#include "core/layout.h"
#include "core/resolved_config.h"

namespace gpuledger::run {

struct KvRequest {
  ResolvedConfig config;
  std::vector<int64_t> ranks;  // the ranks reported
  analytic::KvOptions kv;
  int64_t context = 0;   // tokens per sequence
  int64_t requests = 1;  // concurrent sequences
  double memory_utilization = 0.9;
  int64_t overhead_bytes = 0;    // outside the ledger
  std::optional<int64_t> batch;  // decode batch of the roofline (default: the capacity)
  int64_t prefill_chunk = 2048;  // sizes the activation peak
};

struct KvRoofline {
  int64_t batch = 0;
  analytic::DecodeRoofline roofline;
  double bandwidth_bytes_per_s = 0;
};

struct KvRankRecord {
  int64_t rank = 0;
  Coords coords;
  int64_t kv_heads = 0;
  int64_t kv_bytes_per_token = 0, kv_scale_bytes_per_token = 0;
  int64_t weight_bytes = 0, activation_bytes = 0, reserved_bytes = 0;
  int64_t tokens_kept = 0, sequence_reserved_bytes = 0, sequence_token_bytes = 0;
  std::optional<analytic::KvCapacity> capacity;  // with device memory
  std::optional<KvRoofline> decode_roofline;     // with device memory and bandwidth
};

struct KvRecord {
  KvRequest request;
  int64_t params = 0, padded_vocab = 0;
  std::vector<KvRankRecord> ranks;
};

// Throws LayoutError when a contiguous cache cannot hold the context.
KvRecord run_kv(const KvRequest& request);

}  // namespace gpuledger::run
