// BlockManager: the bookkeeping of a paged KV cache (Kwon et al. 2023,
// "Efficient Memory Management for LLM Serving with PagedAttention", §4.2–4.4;
// vLLM's BlockPool / KVCacheManager). A pool of N blocks of B token slots,
// block 0 reserved as the null block (vLLM's v1/core/block_pool.py takes it
// off the free queue at start and never hands it out), a FIFO free list (the
// block freed longest ago is reused first, as vLLM's free queue), one block
// table per sequence, reference counts for shared prefix blocks.
//
// It holds no memory: block ids index a pool the cache allocated
// (models/kv/kv_cache.h). Counters: blocks in use (null block excluded) and
// tokens stored (slots holding a token, a shared block counted once), now and
// at peak.
//
// ---- sliding window ----
// With a window W, a sequence keeps min(len, W) slots: position p lives in slot
// p mod W (a rolling buffer), so it never holds more than ⌈W / B⌉ blocks.
//
// ---- prefix sharing ----
// add_sequence(id, tokens, {source, P}) starts the new sequence's block table
// with the *full* blocks of source's first P tokens, shared by reference count
// (stored once; freed when the last sequence holding them is freed). The
// partially filled last block of the prefix (P mod B tokens) is not shared and
// not copied: those tokens count as the new sequence's own, in a fresh block,
// and its caller recomputes them — vLLM's prefix caching also hashes and shares
// full blocks only. At least one token of the new sequence is always left
// unshared (vLLM caps a prefix hit at num_tokens − 1: the last prompt token
// must run to give the next token's logits). Prefix sharing needs a window-less
// pool: a rolling buffer would overwrite shared slots.
#pragma once
#include <cstdint>
#include <deque>
#include <optional>
#include <unordered_map>
#include <vector>

namespace gpuledger::kv {

using SeqId = int64_t;

// The first `tokens` tokens of sequence `source` are the new sequence's prefix.
struct PrefixRef {
  SeqId source = 0;
  int64_t tokens = 0;
};

class BlockManager {
 public:
  static constexpr int32_t kNullBlock = 0;

  // num_blocks: the whole pool, the null block included (>= 1); block_tokens B >= 1.
  BlockManager(int64_t num_blocks, int64_t block_tokens, std::optional<int64_t> window = {});

  int64_t num_blocks() const { return num_blocks_; }
  int64_t block_tokens() const { return block_tokens_; }
  std::optional<int64_t> window() const { return window_; }

  // Slots a sequence of `tokens` tokens keeps (min(tokens, W)) and the blocks they take.
  int64_t kept(int64_t tokens) const;
  int64_t blocks_for(int64_t tokens) const;

  // ---- admission and growth ----
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }
  // Whether a new sequence of `tokens` tokens (no prefix) fits in the free blocks now.
  bool can_allocate(int64_t tokens) const { return blocks_for(tokens) <= free_blocks(); }
  // Admits sequence `id` holding `tokens` tokens (>= 1). Returns false, changing
  // nothing, when the free blocks do not suffice. Throws on a known id or a bad prefix.
  bool add_sequence(SeqId id, int64_t tokens, std::optional<PrefixRef> prefix = {});
  // Grows sequence `id` by `tokens`; false (nothing changed) when blocks run out.
  bool append(SeqId id, int64_t tokens);
  // Releases the sequence's blocks (a shared block when its last holder goes).
  void free_sequence(SeqId id);

  // ---- per sequence ----
  bool contains(SeqId id) const { return seqs_.count(id) != 0; }
  int64_t length(SeqId id) const;         // tokens of the sequence
  int64_t shared_tokens(SeqId id) const;  // tokens taken from a prefix at admission
  const std::vector<int32_t>& block_table(SeqId id) const;
  int64_t sequences() const { return static_cast<int64_t>(seqs_.size()); }
  int ref_count(int32_t block) const { return ref_[static_cast<size_t>(block)]; }

  // ---- counters ----
  int64_t blocks_in_use() const { return num_blocks_ - 1 - free_blocks(); }
  int64_t peak_blocks_in_use() const { return peak_blocks_; }
  int64_t tokens_stored() const { return tokens_; }
  int64_t peak_tokens_stored() const { return peak_tokens_; }

 private:
  struct Seq {
    int64_t len = 0;
    int64_t shared = 0;  // tokens in shared blocks (a multiple of B)
    std::vector<int32_t> table;
  };
  const Seq& seq(SeqId id) const;
  int32_t take_block();
  // Sets the fill of blocks [from_block, end) of `s` for its current kept slots.
  void refill(Seq& s, size_t from_block);
  void note_peaks();

  int64_t num_blocks_, block_tokens_;
  std::optional<int64_t> window_;
  std::deque<int32_t> free_;
  std::vector<int> ref_;         // per block: sequences holding it
  std::vector<int64_t> filled_;  // per block: slots holding a token
  std::unordered_map<SeqId, Seq> seqs_;
  int64_t tokens_ = 0, peak_tokens_ = 0, peak_blocks_ = 0;
};

}  // namespace gpuledger::kv
