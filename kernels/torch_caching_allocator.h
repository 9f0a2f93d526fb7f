// A model of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp,
// pytorch/pytorch commit eb42ad6eca0ce61e7c581212b4bf32f991425571, its default
// configuration: no max_split_size, no expandable segments, one stream), to
// say what torch.cuda.memory_reserved() and memory_allocated() would show for
// a sequence of allocations and frees — a ledger's (kernels/ledger.h events).
//
// The rules, as that file states and codes them:
//   - every request is rounded up to a multiple of 512 bytes (kMinBlockSize,
//     round_size); a 0-byte request allocates nothing;
//   - requests <= 1 MiB (kSmallSize) are served from the small pool, whose
//     segments are 2 MiB (kSmallBuffer); larger ones from the large pool:
//     a new segment is 20 MiB (kLargeBuffer) for requests < 10 MiB
//     (kMinLargeAlloc), else the request rounded up to 2 MiB (kRoundLarge)
//     (get_allocation_size);
//   - a request takes the smallest cached free block of its pool that holds it
//     (best fit: BlockComparatorSize orders by size, then address), else a new
//     segment (cudaMalloc);
//   - the block is split when the rest is >= 512 bytes (small pool) or
//     > 1 MiB (large pool) (should_split); otherwise the whole block is handed
//     out and counted as allocated;
//   - a freed block merges with free neighbours of its segment (free_block,
//     try_merge_blocks) and stays cached: segments go back to the driver only
//     when a cudaMalloc fails (release_cached_blocks) or on empty_cache(),
//     neither of which is modelled, so reserved only grows.
// "allocated" is the sum of the handed-out blocks' sizes (stats.allocated_bytes
// counts block->size: rounded, and whole when not split); "requested" the sum
// of the sizes asked for.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernels/ledger.h"

namespace gpuledger {

class TorchCachingAllocatorModel {
 public:
  static constexpr int64_t kMinBlockSize = 512;
  static constexpr int64_t kSmallSize = int64_t{1} << 20;
  static constexpr int64_t kSmallBuffer = int64_t{2} << 20;
  static constexpr int64_t kLargeBuffer = int64_t{20} << 20;
  static constexpr int64_t kMinLargeAlloc = int64_t{10} << 20;
  static constexpr int64_t kRoundLarge = int64_t{2} << 20;

  static int64_t round_size(int64_t bytes);
  static int64_t segment_size(int64_t rounded_bytes);  // get_allocation_size

  // Returns a handle for free(); a 0-byte request returns -1 and books nothing.
  int64_t malloc(int64_t bytes);
  void free(int64_t handle);

  int64_t allocated_bytes() const { return allocated_; }
  int64_t reserved_bytes() const { return reserved_; }
  int64_t requested_bytes() const { return requested_; }
  int64_t peak_allocated_bytes() const { return peak_allocated_; }
  int64_t peak_reserved_bytes() const { return reserved_; }  // never released: the peak is the current
  int64_t peak_requested_bytes() const { return peak_requested_; }
  int64_t segments() const { return segments_; }

 private:
  struct Block {
    int64_t size = 0;
    int64_t segment = 0;
    int64_t requested = 0;
    bool small = false;
    bool allocated = false;
  };
  using FreeSet = std::set<std::pair<int64_t, int64_t>>;  // (size, address): best fit, then lowest address
  FreeSet& pool(bool small) { return small ? small_free_ : large_free_; }
  void insert_free(int64_t addr);
  int64_t merge_free_neighbours(int64_t addr);

  std::map<int64_t, Block> blocks_;  // by address; segments occupy disjoint ranges
  FreeSet small_free_, large_free_;
  int64_t next_address_ = 0, segments_ = 0;
  int64_t allocated_ = 0, reserved_ = 0, requested_ = 0, peak_allocated_ = 0, peak_requested_ = 0;
};

// A ledger's events replayed through the model. The ledger does not say which
// buffer a free releases, only its account and size: a free is matched to the
// most recent live allocation of that account and size (last in, first out),
// which is the order the training step and the serving engine free their
// temporaries in; a different match between equal sizes can change where
// blocks merge, never the bytes allocated.
struct TorchMemoryReplay {
  int64_t events = 0;
  int64_t cublas_workspace_bytes = 0;  // allocated first, as the first GEMM does, and never freed
  int64_t peak_requested_bytes = 0;
  int64_t peak_allocated_bytes = 0;  // torch.cuda.max_memory_allocated()
  int64_t peak_reserved_bytes = 0;   // torch.cuda.max_memory_reserved()
  int64_t segments = 0;
};
TorchMemoryReplay replay_torch_caching_allocator(const std::vector<LedgerEvent>& events,
                                                 int64_t cublas_workspace_bytes);

}  // namespace gpuledger
