// Swap space of preempted sequences (see kv_swap.h).
#include "models/kv/kv_swap.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace gpuledger::kv {

void KvSwapSpace::swap_out(PagedKvCache& cache, SeqId id) {
  if (swapped_.count(id) != 0) throw std::invalid_argument("KV sequence " + std::to_string(id) + " already swapped");
  const std::vector<int32_t> table = cache.blocks().block_table(id);
  const int64_t bb = cache.block_bytes();
  const auto n = static_cast<int64_t>(table.size());
  Entry e;
  e.tokens = cache.length(id);
  e.blocks = n;
  Device& dev = cache.device();
  e.host = dev.alloc(n * bb, Account::kHost, "kv.swap");
  if (dev.touches_memory())
    for (int64_t k = 0; k < n; ++k)
      dev.copy_to_host(static_cast<char*>(e.host.data()) + k * bb,
                       static_cast<const char*>(cache.pool_data()) + table[static_cast<size_t>(k)] * bb, bb);
  cache.free_sequence(id);
  bytes_out_ += n * bb;
  blocks_out_ += n;
  swapped_blocks_ += n;
  peak_swapped_blocks_ = std::max(peak_swapped_blocks_, swapped_blocks_);
  swapped_.emplace(id, std::move(e));
}

bool KvSwapSpace::can_swap_in(const PagedKvCache& cache, SeqId id, int64_t extra_tokens) const {
  auto it = swapped_.find(id);
  if (it == swapped_.end()) throw std::out_of_range("no swapped KV sequence " + std::to_string(id));
  return cache.blocks().can_allocate(it->second.tokens + extra_tokens);
}

bool KvSwapSpace::swap_in(PagedKvCache& cache, SeqId id, SeqId new_id) {
  auto it = swapped_.find(id);
  if (it == swapped_.end()) throw std::out_of_range("no swapped KV sequence " + std::to_string(id));
  Entry& e = it->second;
  if (!cache.add_sequence(new_id, e.tokens)) return false;
  const std::vector<int32_t>& table = cache.blocks().block_table(new_id);
  if (static_cast<int64_t>(table.size()) != e.blocks)
    throw std::logic_error("swap-in of KV sequence " + std::to_string(id) + ": " + std::to_string(table.size()) +
                           " blocks for " + std::to_string(e.blocks) + " swapped");
  const int64_t bb = cache.block_bytes();
  Device& dev = cache.device();
  if (dev.touches_memory())
    for (int64_t k = 0; k < e.blocks; ++k)
      dev.copy_from_host(static_cast<char*>(cache.pool_data()) + table[static_cast<size_t>(k)] * bb,
                         static_cast<const char*>(e.host.data()) + k * bb, bb);
  bytes_in_ += e.blocks * bb;
  swapped_blocks_ -= e.blocks;
  swapped_.erase(it);  // the host copy unbooks
  return true;
}

}  // namespace gpuledger::kv
