// Setting up a serving rank (the measured side of `gpuledger infer`):
// profile the activation peak of one prefill chunk, size the KV pool by
// vLLM's rule, build the cache, and measure its capacity by filling it.
//
// vLLM (Worker.determine_num_available_blocks): run one forward of
// max_num_batched_tokens, read the allocator's peak, and give the KV cache
//   pool = ⌊utilization × device memory⌋ − weights − activation peak − overhead.
// Here the "allocator" is the ledger: the peak of the workspace account
// during the profiling forward. Nothing here reads models/analytic.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "models/kv/kv_cache.h"
#include "models/transformer/infer_model.h"

namespace gpuledger {

// The workspace peak (bytes) of one prefill forward of `chunk` tokens (one
// sequence, token ids 0) through `model`, on a scratch contiguous cache of
// `geometry` (freed after). Resets the ledger's peaks (vLLM too profiles first).
int64_t profile_activation_peak(InferenceModel& model, const kv::KvGeometry& geometry, int64_t chunk);

// ⌊utilization × device_bytes⌋ − weights − activation peak − overhead (may be < 0: nothing fits).
int64_t serving_pool_bytes(int64_t device_bytes, double utilization, int64_t weight_bytes,
                           int64_t activation_peak_bytes, int64_t overhead_bytes);

struct CacheSpec {
  std::string_view kind = "paged";  // "paged" | "contiguous"
  int64_t block_tokens = 16;        // paged
  int64_t max_model_len = 0;        // contiguous reservation
  std::optional<int64_t> window;    // sliding-window model
  KvEviction eviction;              // the KV budget's policy (core/kv_types.h)
};
// The cache a pool of `pool_bytes` gives: paged, ⌊(pool − fixed scales) / block bytes⌋
// blocks allocated now; contiguous, reservations admitted while they fit the pool.
// Throws std::runtime_error when the pool holds no block (or no reservation).
std::unique_ptr<kv::KvCache> make_kv_cache(Device& device, const kv::KvGeometry& geometry, int64_t pool_bytes,
                                           const CacheSpec& spec);

// Capacity measured: admits sequences of `context` tokens (ids from `first_id`)
// until admission fails, then frees them; returns how many were admitted.
// `assigned_bytes_full`, when given, receives the cache's assigned bytes when full.
int64_t fill_capacity(kv::KvCache& cache, int64_t context, kv::SeqId first_id = 1'000'000'000,
                      int64_t* assigned_bytes_full = nullptr);

}  // namespace gpuledger
