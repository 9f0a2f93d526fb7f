// The caching-allocator model (see torch_caching_allocator.h for the rules
// and the PyTorch source they come from).
#include "kernels/torch_caching_allocator.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/int_math.h"

namespace gpuledger {

int64_t TorchCachingAllocatorModel::round_size(int64_t bytes) {
  if (bytes < kMinBlockSize) return kMinBlockSize;
  return kMinBlockSize * ceil_div(bytes, kMinBlockSize);
}

int64_t TorchCachingAllocatorModel::segment_size(int64_t rounded_bytes) {
  if (rounded_bytes <= kSmallSize) return kSmallBuffer;
  if (rounded_bytes < kMinLargeAlloc) return kLargeBuffer;
  return kRoundLarge * ceil_div(rounded_bytes, kRoundLarge);
}

void TorchCachingAllocatorModel::insert_free(int64_t addr) {
  const Block& b = blocks_.at(addr);
  pool(b.small).insert({b.size, addr});
}

int64_t TorchCachingAllocatorModel::malloc(int64_t bytes) {
  if (bytes < 0) throw std::invalid_argument("malloc of a negative size " + std::to_string(bytes));
  if (bytes == 0) return -1;  // PyTorch returns an empty pointer and books nothing
  const int64_t size = round_size(bytes);
  const bool small = size <= kSmallSize;
  FreeSet& free_set = pool(small);
  int64_t addr = 0;
  auto it = free_set.lower_bound({size, int64_t{-1}});
  if (it != free_set.end()) {
    addr = it->second;
    free_set.erase(it);
  } else {
    const int64_t seg = segment_size(size);
    addr = next_address_;
    next_address_ += seg;
    blocks_[addr] = Block{seg, segments_++, 0, small, false};
    reserved_ += seg;
  }
  Block& b = blocks_.at(addr);
  const int64_t remaining = b.size - size;
  // should_split: the rest must be a usable block of its pool.
  if (small ? remaining >= kMinBlockSize : remaining > kSmallSize) {
    blocks_[addr + size] = Block{remaining, b.segment, 0, small, false};
    insert_free(addr + size);
    b.size = size;
  }
  b.allocated = true;
  b.requested = bytes;
  allocated_ += b.size;
  requested_ += bytes;
  peak_allocated_ = std::max(peak_allocated_, allocated_);
  peak_requested_ = std::max(peak_requested_, requested_);
  return addr;
}

int64_t TorchCachingAllocatorModel::merge_free_neighbours(int64_t addr) {
  auto it = blocks_.find(addr);
  // The next block of the same segment, if free, is absorbed.
  auto next = std::next(it);
  if (next != blocks_.end() && next->second.segment == it->second.segment && !next->second.allocated) {
    pool(next->second.small).erase({next->second.size, next->first});
    it->second.size += next->second.size;
    blocks_.erase(next);
  }
  // This block is absorbed by the previous one of the same segment, if free.
  if (it != blocks_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.segment == it->second.segment && !prev->second.allocated) {
      pool(prev->second.small).erase({prev->second.size, prev->first});
      prev->second.size += it->second.size;
      blocks_.erase(it);
      return prev->first;
    }
  }
  return addr;
}

void TorchCachingAllocatorModel::free(int64_t handle) {
  if (handle < 0) return;
  auto it = blocks_.find(handle);
  if (it == blocks_.end() || !it->second.allocated)
    throw std::logic_error("free of a block that is not allocated (handle " + std::to_string(handle) + ")");
  Block& b = it->second;
  allocated_ -= b.size;
  requested_ -= b.requested;
  b.allocated = false;
  b.requested = 0;
  insert_free(merge_free_neighbours(handle));
}

TorchMemoryReplay replay_torch_caching_allocator(const std::vector<LedgerEvent>& events,
                                                 int64_t cublas_workspace_bytes) {
  TorchCachingAllocatorModel model;
  model.malloc(cublas_workspace_bytes);
  // Live handles by (account, bytes), the most recent last.
  std::map<std::pair<int, int64_t>, std::vector<int64_t>> live;
  for (const auto& e : events) {
    const std::pair<int, int64_t> key{static_cast<int>(e.account), e.bytes};
    if (e.alloc) {
      live[key].push_back(model.malloc(e.bytes));
      continue;
    }
    auto found = live.find(key);
    if (found == live.end() || found->second.empty())
      throw std::logic_error("ledger event list frees " + std::to_string(e.bytes) + " bytes never allocated");
    model.free(found->second.back());
    found->second.pop_back();
  }
  TorchMemoryReplay r;
  r.events = static_cast<int64_t>(events.size());
  r.cublas_workspace_bytes = cublas_workspace_bytes;
  r.peak_requested_bytes = model.peak_requested_bytes();
  r.peak_allocated_bytes = model.peak_allocated_bytes();
  r.peak_reserved_bytes = model.peak_reserved_bytes();
  r.segments = model.segments();
  return r;
}

}  // namespace gpuledger
