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
  int64_t context = 0;               // tokens per sequence
  int64_t requests = 1;              // concurrent sequences
  double memory_utilization = 0.92;  // vLLM's gpu_memory_utilization default
  int64_t overhead_bytes = 0;        // outside the ledger
  std::optional<int64_t> batch;      // decode batch of the roofline (default: the capacity)
  int64_t prefill_chunk = 0;         // sizes the activation peak; 0: vLLM's max_num_batched_tokens for the device
  // vLLM's memory terms beside the weights and the activation peak: what grew
  // outside torch after its baseline snapshot, and the CUDA-graph estimate.
  int64_t non_torch_bytes = 0;
  int64_t cuda_graph_bytes = 0;
};

// The prefill chunk a request runs with: --prefill-chunk, else vLLM's default
// max_num_batched_tokens for the device (`vllm serve`), else 2048.
int64_t effective_prefill_chunk(const KvRequest& q);

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
  std::optional<analytic::VllmKvLog> vllm;       // with device memory, paged, full attention
};

struct KvRecord {
  KvRequest request;
  int64_t params = 0, padded_vocab = 0;
  std::vector<KvRankRecord> ranks;
};

// Throws LayoutError when a contiguous cache cannot hold the context.
KvRecord run_kv(const KvRequest& request);

}  // namespace gpuledger::run
