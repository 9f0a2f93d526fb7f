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
// Two ways for a new sequence to start from blocks already stored:
//   by source: add_sequence(id, tokens, {source, P}) takes the *full* blocks
//     of sequence source's first P tokens;
//   by hash (prefix caching, vLLM v1): add_sequence(id, tokens, {.block_hashes
//     = h}) with h[k] the chained hash of the sequence's block k
//     (models/kv/block_hash.h) takes the longest run of leading blocks whose
//     hashes are cached. A block is cached (its hash registered) as soon as a
//     sequence's length covers it fully — at admission or by an append — so a
//     sequence admitted in the same step as the one filling the block already
//     hits: the engine writes every sequence's K/V of a layer before any
//     attention of that layer reads it (KvCache::write, then attend).
// Either way the shared blocks are held by reference count (stored once,
// booked once: the pool is one allocation), the partially filled last block is
// never shared (its tokens are recomputed), and at least one token of the new
// sequence is left unshared (vLLM caps a hit at num_tokens − 1: the last prompt
// token must run to give the next token's logits). Prefix sharing needs a
// window-less pool: a rolling buffer would overwrite shared slots.
//
// ---- the free queue and eviction (vLLM v1 block_pool.py, FreeKVCacheBlockQueue) ----
// A block whose last holder leaves goes to the tail of the free queue but
// keeps its hash and contents: a later hit takes it back off the queue (vLLM's
// touch). take_block pops the head — the block freed longest ago, least
// recently used — and evicts its hash. A sequence frees its blocks tail first
// (vLLM's free_blocks walks the request's blocks in reverse), so a prompt's
// last blocks are evicted before its first, which more requests share.
// Cached but unreferenced blocks count as free (free_blocks, blocks_in_use) and
// their tokens as not stored.
//
// Source: vllm-project/vllm at commit 002f349 (vllm/v1/core/block_pool.py:
// BlockPool.get_new_block_bundles, _maybe_evict_cached_block, touch,
// free_blocks, cache_full_blocks; single_type_kv_cache_manager.py free, which
// frees in reverse "so that the tail blocks are freed first").
#pragma once
#include <cstdint>
#include <list>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

namespace gpuledger::kv {

using SeqId = int64_t;

using BlockHash = uint64_t;

// The new sequence's prefix: the first `tokens` tokens of sequence `source`,
// or, when block_hashes is not empty, the cached blocks matching its block
// hashes (block k's chained hash at k; full blocks of the sequence's tokens).
struct PrefixRef {
  PrefixRef(SeqId source_seq, int64_t prefix_tokens) : source(source_seq), tokens(prefix_tokens) {}
  explicit PrefixRef(std::vector<BlockHash> hashes) : block_hashes(std::move(hashes)) {}
  SeqId source = 0;
  int64_t tokens = 0;
  std::vector<BlockHash> block_hashes;
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
  // Whether it fits when its leading blocks hit the cache by `block_hashes`:
  // the hit blocks need no new block, but those of them on the free queue
  // leave it.
  bool can_allocate(int64_t tokens, const std::vector<BlockHash>& block_hashes) const;
  // Leading blocks of `block_hashes` cached now, at most ⌊max_tokens / B⌋ (vLLM's
  // get_computed_blocks with its num_tokens − 1 cap passed as max_tokens).
  int64_t cached_prefix_blocks(const std::vector<BlockHash>& block_hashes, int64_t max_tokens) const;
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
  // The free queue, head (next evicted / handed out) first.
  std::vector<int32_t> free_queue() const { return {free_.begin(), free_.end()}; }
  // Whether `block` holds a cached hash (reachable by a prefix hit).
  bool is_cached(int32_t block) const { return hash_of_[static_cast<size_t>(block)].has_value(); }
  // Cached blocks whose hash was dropped to hand the block out again.
  int64_t evictions() const { return evictions_; }

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
    std::vector<BlockHash> hashes;  // by-hash sequences: the hash of each full block
  };
  const Seq& seq(SeqId id) const;
  int32_t take_block();
  // A cached block comes back into use: off the free queue if nobody held it.
  void touch(int32_t block);
  // Registers the hashes of the blocks of `s` its length now fills (vLLM's cache_full_blocks).
  void cache_full_blocks(Seq& s);
  // Sets the fill of blocks [from_block, end) of `s` for its current kept slots.
  void refill(Seq& s, size_t from_block);
  void note_peaks();

  int64_t num_blocks_, block_tokens_;
  std::optional<int64_t> window_;
  std::list<int32_t> free_;                              // the free queue, LRU at the head
  std::vector<std::list<int32_t>::iterator> queue_pos_;  // per block: its place on free_
  std::vector<std::optional<BlockHash>> hash_of_;        // per block: its cached hash
  std::unordered_map<BlockHash, int32_t> cached_;        // hash → block (vLLM cached_block_hash_to_block)
  int64_t evictions_ = 0;
  std::vector<int> ref_;         // per block: sequences holding it
  std::vector<int64_t> filled_;  // per block: slots holding a token
  std::unordered_map<SeqId, Seq> seqs_;
  int64_t tokens_ = 0, peak_tokens_ = 0, peak_blocks_ = 0;
};

}  // namespace gpuledger::kv
