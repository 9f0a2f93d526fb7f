// The request and record of `kv`: the cache, the context and requests and the
// serving memory rule asked for, and per rank the analytic KV cache (bytes per
// token, the reservation, the capacity, the decode roofline).
// bench/run/kv_run.h fills them and bench/report/kv_json.h writes them; the
// types sit below both, so that report/ needs nothing of run/.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analytic/kv_cache.h"
#include "core/layout.h"
#include "core/resolved_config.h"

namespace gpuledger::run {

// The lengths a cache is planned for (`kv --trace` or `--length-dist`): each
// request's total length (prompt + generated), the percentile to size at and
// the headroom factor (the pool planned is pool / headroom; the bytes
// reserved for the requests are multiplied by it).
struct KvLengths {
  std::vector<int64_t> totals;
  std::string source;  // "trace PATH" or "--length-dist"
  double percentile = 95;
  double headroom = 1.2;
};

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
  std::optional<KvLengths> lengths;  // capacity at a percentile of a trace's lengths
};

// The prefill chunk a request runs with: --prefill-chunk, else vLLM's default
// max_num_batched_tokens for the device (`vllm serve`), else 2048.
int64_t effective_prefill_chunk(const KvRequest& q);

// The cache at one length of a trace: the mean (rounded up) or the percentile.
struct KvLengthBasis {
  std::string basis;  // "mean" or "p95"
  int64_t tokens = 0;
  int64_t sequence_reserved_bytes = 0;           // one sequence of `tokens`, reserved
  int64_t requests_reserved_bytes = 0;           // --requests of them, × headroom (rounded up)
  std::optional<analytic::KvCapacity> capacity;  // sequences of `tokens` in pool / headroom (with device memory)
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
  std::optional<analytic::VllmKvLog> vllm;       // with device memory, paged, full attention
  std::vector<KvLengthBasis> by_length;          // with lengths: the mean, then the percentile
};

struct KvRecord {
  KvRequest request;
  int64_t params = 0, padded_vocab = 0;
  std::vector<KvRankRecord> ranks;
};

}  // namespace gpuledger::run
