// Swap space for preemption by swap (vLLM v0's PreemptionMode.SWAP,
// vllm-project/vllm before v1: Scheduler._preempt_by_swap / _swap_in with
// BlockSpaceManager.swap_out / swap_in; Kwon et al. 2023 §4.5 "Swapping"):
// a preempted sequence's blocks are copied to host memory and freed from the
// pool; when room returns they are copied back into fresh blocks and the
// sequence resumes where it stopped, nothing recomputed.
//
// Host memory is allocated through the cache's own Device as Account::kHost
// (kernels/device.h: ordinary memory on cpu, pinned on cuda, none on meta,
// which copies nothing), so the rank's Ledger books every swapped byte in its
// `host` account, outside the device total. A block is a contiguous region
// of the paged pool (kernels/kv_storage.h: block id × block bytes), so a
// sequence moves as one copy per block: bytes each way = blocks × block bytes.
// A block shared by prefix caching is copied like a private one (the swapped
// sequence owns its copy; the others keep theirs in the pool).
#pragma once
#include <cstdint>
#include <map>

#include "kernels/device.h"
#include "models/kv/kv_cache.h"

namespace gpuledger::kv {

class KvSwapSpace {
 public:
  // Copies sequence `id`'s blocks to host memory and frees it from `cache`;
  // `id` then names its swapped copy.
  void swap_out(PagedKvCache& cache, SeqId id);
  // Whether swapped `id` fits back with room for `extra_tokens` more.
  bool can_swap_in(const PagedKvCache& cache, SeqId id, int64_t extra_tokens) const;
  // Admits `new_id` with swapped `id`'s tokens, copies them back and frees
  // the host copy; false (nothing changed) when the pool has no room.
  bool swap_in(PagedKvCache& cache, SeqId id, SeqId new_id);

  int64_t swapped_sequences() const { return static_cast<int64_t>(swapped_.size()); }
  int64_t bytes_out() const { return bytes_out_; }  // device → host, all swaps
  int64_t bytes_in() const { return bytes_in_; }    // host → device
  int64_t blocks_out() const { return blocks_out_; }
  int64_t swapped_blocks() const { return swapped_blocks_; }            // held in host memory now
  int64_t peak_swapped_blocks() const { return peak_swapped_blocks_; }  // the most held at once

 private:
  struct Entry {
    Buffer host;  // blocks × block bytes
    int64_t tokens = 0, blocks = 0;
  };
  std::map<SeqId, Entry> swapped_;
  int64_t bytes_out_ = 0, bytes_in_ = 0, blocks_out_ = 0, swapped_blocks_ = 0, peak_swapped_blocks_ = 0;
};

}  // namespace gpuledger::kv
