// Serving setup (see infer_setup.h): profiling, pool sizing, cache
// construction, capacity by filling.
#include "models/transformer/infer_setup.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpuledger {

int64_t profile_activation_peak(InferenceModel& model, const kv::KvGeometry& geometry, int64_t chunk) {
  Device& dev = model.device();
  kv::ContiguousKvCache scratch(dev, geometry, chunk);
  scratch.add_sequence(0, chunk);
  Ledger& ledger = dev.ledger();
  const int64_t before = ledger.live(Account::kWorkspace);
  ledger.reset_peaks();
  const std::vector<int32_t> ids(static_cast<size_t>(chunk), 0);
  model.forward({{0, chunk}}, ids, scratch);
  dev.synchronize();
  return ledger.peak(Account::kWorkspace) - before;
}

int64_t serving_pool_bytes(int64_t device_bytes, double utilization, int64_t weight_bytes,
                           int64_t activation_peak_bytes, int64_t overhead_bytes) {
  // vLLM casts utilization × total to int: the floor of the product.
  const auto usable = static_cast<int64_t>(std::floor(utilization * static_cast<double>(device_bytes)));
  return usable - weight_bytes - activation_peak_bytes - overhead_bytes;
}

std::unique_ptr<kv::KvCache> make_kv_cache(Device& device, const kv::KvGeometry& geometry, int64_t pool_bytes,
                                           const CacheSpec& spec) {
  if (spec.kind == "contiguous") {
    if (spec.max_model_len < 1) throw std::invalid_argument("a contiguous cache needs max_model_len >= 1");
    auto c = std::make_unique<kv::ContiguousKvCache>(device, geometry, spec.max_model_len, spec.window, pool_bytes,
                                                     spec.eviction);
    if (!c->can_admit(1))
      throw std::runtime_error("a KV pool of " + std::to_string(pool_bytes) + " bytes holds no reservation of " +
                               std::to_string(c->reservation_bytes()) + " bytes");
    return c;
  }
  if (spec.kind != "paged") throw std::invalid_argument("unknown KV cache kind '" + std::string(spec.kind) + "'");
  const int64_t blocks = kv::PagedKvCache::blocks_in(pool_bytes, geometry, spec.block_tokens);
  if (blocks < 2)
    throw std::runtime_error("a KV pool of " + std::to_string(pool_bytes) + " bytes holds " + std::to_string(blocks) +
                             " blocks: none beside the null block");
  return std::make_unique<kv::PagedKvCache>(device, geometry, blocks, spec.block_tokens, spec.window, spec.eviction);
}

int64_t fill_capacity(kv::KvCache& cache, int64_t context, kv::SeqId first_id, int64_t* assigned_bytes_full) {
  int64_t n = 0;
  while (cache.can_admit(context) && cache.add_sequence(first_id + n, context)) ++n;
  if (assigned_bytes_full) *assigned_bytes_full = cache.assigned_bytes();
  for (int64_t i = 0; i < n; ++i) cache.free_sequence(first_id + i);
  return n;
}

}  // namespace gpuledger
