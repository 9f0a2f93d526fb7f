// KV caches of the inference phase (docs/architecture.md "Inference and the KV cache"):
// the KvCache interface and its two implementations, written against the
// Device only. Every byte is booked through Device::alloc(…, Account::kKv).
//
//   ContiguousKvCache — the naive engine: each admitted sequence reserves
//     kept(max_model_len) = min(max_model_len, window) token slots at
//     admission (one Device::alloc), freed at completion.
//   PagedKvCache — vLLM (Kwon et al. 2023): the whole pool, N blocks of B
//     slots with block 0 the null block, allocated up front (one
//     Device::alloc); blocks handed out by a BlockManager as sequences grow.
// Both hold the per-tensor / per-channel scales in one more kv buffer
// (KvGeometry::fixed_scale_bytes), allocated with the cache.
//
// Memory layout: kernels/kv_storage.h (regions of S slots, one section per
// layer: K and V values (Hkv, S, D) in the format, then per token-head scales).
// A reservation is a region of S = kept(max_model_len) slots; a block is a
// region of S = B slots. Sliding window: position p lives in slot p mod W.
//
// A KV budget (KvEviction: window, sink, h2o) caps every sequence at `budget`
// slots per layer, as a sliding window of that size does: the slot cap is the
// smaller of the two (slot_cap). Under sink and h2o the positions a sequence
// keeps are scattered: models/kv/kv_eviction.h keeps their slot maps, and the
// views carry them to the kernels (on a backend that reads no data, the views
// carry the cap as a rolling window instead: the same bytes and FLOPs).
//
// Three figures (docs/formulas/kv.md gives the analytic side):
//   pool_bytes      what the ledger books for this cache now (paged: the whole
//                   pool, constant; contiguous: the live reservations);
//   assigned_bytes  what is handed to sequences, the null block and the fixed
//                   scales included: paged (blocks in use + 1)·block bytes +
//                   fixed, contiguous reservations·reservation bytes + fixed —
//                   the same quantity as analytic::kv_reserved_bytes;
//   token_bytes     tokens actually stored × per-token bytes (values and
//                   per-token scales; a shared block counted once).
// assigned − token bytes is the waste: under one block per sequence (plus the
// null block) when paged, max_model_len − len slots per sequence when contiguous.
//
// A step of the engine, per layer: write() the new tokens' K and V, then
// attend() their queries — both over the same batch of (sequence, n_new).
#pragma once
#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include "kernels/device.h"
#include "models/kv/block_manager.h"
#include "models/kv/kv_eviction.h"
#include "models/kv/kv_format.h"

namespace gpuledger::kv {

// One sequence of a step: its last n_new tokens are new (written, then queried).
struct SeqStep {
  SeqId id = 0;
  int64_t n_new = 0;
};

class KvCache {
 public:
  // `window`: a sliding-window model's; `eviction`: the KV budget's policy
  // (sink and h2o not with a model window).
  KvCache(Device& device, KvGeometry geometry, std::optional<int64_t> window, KvEviction eviction = {});
  virtual ~KvCache() = default;
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  virtual std::string_view kind() const = 0;  // "contiguous" | "paged"
  const KvGeometry& geometry() const { return geom_; }
  // Slots a sequence keeps at most: min(model window, budget); none: every token.
  std::optional<int64_t> slot_cap() const { return slot_cap_; }
  const KvEviction& eviction() const { return eviction_; }
  // Tokens given up under the KV budget so far (window, sink, h2o; 0 without one).
  int64_t evicted_tokens() const { return evicted_tokens_; }
  Device& device() { return device_; }

  // ---- sequences ----
  // Whether a sequence of `prompt_tokens` (no prefix) would be admitted now.
  virtual bool can_admit(int64_t prompt_tokens) const = 0;
  // Admits `id` holding `prompt_tokens` tokens (>= 1; their K/V are written by
  // the following steps). With `prefix`, tokens of the source sequence's prefix
  // may be shared instead of stored again (paged: its full blocks; contiguous:
  // none); cached_tokens(id) says how many, and the caller writes the rest.
  // False (nothing changed) when there is no room.
  virtual bool add_sequence(SeqId id, int64_t prompt_tokens, std::optional<PrefixRef> prefix = {}) = 0;
  // Grows `id` by `tokens` (decode: 1). False (nothing changed) when there is no room.
  virtual bool append_tokens(SeqId id, int64_t tokens) = 0;
  virtual void free_sequence(SeqId id) = 0;
  virtual bool contains(SeqId id) const = 0;
  virtual int64_t length(SeqId id) const = 0;
  virtual int64_t cached_tokens(SeqId id) const = 0;  // shared from a prefix at admission
  virtual int64_t sequences() const = 0;
  // The most new tokens a step of `id` may carry exactly after its current
  // length under a slot cap (kernels/kv_storage.h, validate_kv_view): enough to
  // fill the cap, and at least 1. Without a cap: unlimited (INT64_MAX).
  int64_t max_step_tokens(SeqId id) const;

  // ---- the data path, one layer at a time ----
  // What the KV ops read and write for `batch` at `layer` (0 … layers − 1).
  // Checks every step: a known id, 0 <= n_new <= length, new tokens outside
  // the shared prefix, and the window rule.
  KvCacheView view(int64_t layer, const std::vector<SeqStep>& batch) const;
  // Writes the new tokens' K and V: k, v per sequence (Hkv, n_new, D) in t,
  // packed in batch order. Per-tensor / per-channel scales are calibrated on
  // the first write to each layer (models/kv/kv_format.h).
  void write(int64_t layer, const std::vector<SeqStep>& batch, const void* k, const void* v, DType t);
  // Attention of the new tokens: q, out per sequence (Hq, n_new, D) in t.
  void attend(int64_t layer, const std::vector<SeqStep>& batch, void* out, const void* q, DType t, int64_t q_heads);

  // ---- figures ----
  virtual int64_t pool_bytes() const = 0;
  virtual int64_t assigned_bytes() const = 0;
  virtual int64_t peak_assigned_bytes() const = 0;
  virtual int64_t tokens_stored() const = 0;
  virtual int64_t peak_tokens_stored() const = 0;
  int64_t token_bytes() const { return tokens_stored() * geom_.token_bytes(); }
  int64_t peak_token_bytes() const { return peak_tokens_stored() * geom_.token_bytes(); }

 protected:
  // Where sequence `id` lives: its region base and block table.
  virtual void locate(SeqId id, KvSeqView& s) const = 0;
  virtual int64_t region_tokens() const = 0;  // S: slots per region
  int64_t region_bytes() const { return region_tokens() * geom_.token_bytes(); }
  // The eviction state follows every sequence the cache admits, grows and frees.
  void track_add(SeqId id, int64_t tokens) {
    count_evicted(0, tokens);
    if (evict_) evict_->add(id, tokens);
  }
  void track_append(SeqId id, int64_t tokens) {
    count_evicted(length(id) - tokens, length(id));
    if (evict_) evict_->append(id, tokens);
  }
  void count_evicted(int64_t len_before, int64_t len_after) {
    if (!eviction_.evicts()) return;
    const int64_t cap = *slot_cap_;
    evicted_tokens_ += std::max<int64_t>(0, len_after - cap) - std::max<int64_t>(0, len_before - cap);
  }
  void track_free(SeqId id) {
    if (evict_) evict_->erase(id);
  }

  Device& device_;
  KvGeometry geom_;
  std::optional<int64_t> slot_cap_;  // min(model window, KV budget): slots a sequence keeps at most
  KvEviction eviction_;
  mutable std::optional<KvEvictionState> evict_;  // sink, h2o: slot maps (built lazily by view)
  int64_t evicted_tokens_ = 0;
  Buffer fixed_scales_;           // (L, 2, fixed_scales_per_layer) fp32; empty when none
  std::vector<bool> calibrated_;  // per layer: fixed scales set by a first write
};

class ContiguousKvCache final : public KvCache {
 public:
  // Each sequence reserves kept(max_model_len) slots. `budget_bytes`, when
  // given, is the pool (vLLM's rule): admission stops when one more
  // reservation would not fit beside the fixed scales. Without it the device's
  // memory decides (Device::alloc throws OutOfMemory).
  ContiguousKvCache(Device& device, KvGeometry geometry, int64_t max_model_len, std::optional<int64_t> window = {},
                    std::optional<int64_t> budget_bytes = {}, KvEviction eviction = {});

  std::string_view kind() const override { return "contiguous"; }
  int64_t max_model_len() const { return max_model_len_; }
  int64_t reservation_tokens() const { return slots_; }
  int64_t reservation_bytes() const { return region_bytes(); }

  bool can_admit(int64_t prompt_tokens) const override;
  bool add_sequence(SeqId id, int64_t prompt_tokens, std::optional<PrefixRef> prefix = {}) override;
  bool append_tokens(SeqId id, int64_t tokens) override;
  void free_sequence(SeqId id) override;
  bool contains(SeqId id) const override { return seqs_.count(id) != 0; }
  int64_t length(SeqId id) const override;
  int64_t cached_tokens(SeqId id) const override;
  int64_t sequences() const override { return static_cast<int64_t>(seqs_.size()); }

  int64_t pool_bytes() const override;
  int64_t assigned_bytes() const override { return pool_bytes(); }
  int64_t peak_assigned_bytes() const override;
  int64_t tokens_stored() const override { return tokens_; }
  int64_t peak_tokens_stored() const override { return peak_tokens_; }

 protected:
  void locate(SeqId id, KvSeqView& s) const override;
  int64_t region_tokens() const override { return slots_; }

 private:
  struct Seq {
    Buffer reservation;  // (L, S slots of one layer section each) — kernels/kv_storage.h
    int64_t len = 0;
  };
  int64_t kept(int64_t len) const { return slot_cap_ ? std::min(len, *slot_cap_) : len; }
  int64_t max_model_len_, slots_;
  std::optional<int64_t> budget_;
  std::map<SeqId, Seq> seqs_;
  int64_t tokens_ = 0, peak_tokens_ = 0, peak_seqs_ = 0;
};

class PagedKvCache final : public KvCache {
 public:
  // num_blocks: the pool, the null block included (>= 1); block_tokens B.
  PagedKvCache(Device& device, KvGeometry geometry, int64_t num_blocks, int64_t block_tokens = 16,
               std::optional<int64_t> window = {}, KvEviction eviction = {});
  // Blocks a pool of `bytes` holds after the fixed scales (vLLM sizes its pool
  // as ⌊available / block bytes⌋; the null block is one of them). 0 if none.
  static int64_t blocks_in(int64_t bytes, const KvGeometry& geometry, int64_t block_tokens);

  std::string_view kind() const override { return "paged"; }
  const BlockManager& blocks() const { return blocks_; }
  int64_t block_bytes() const { return region_bytes(); }
  void* pool_data() const { return pool_.data(); }

  bool can_admit(int64_t prompt_tokens) const override { return blocks_.can_allocate(prompt_tokens); }
  bool add_sequence(SeqId id, int64_t prompt_tokens, std::optional<PrefixRef> prefix = {}) override;
  bool append_tokens(SeqId id, int64_t tokens) override;
  void free_sequence(SeqId id) override;
  bool contains(SeqId id) const override { return blocks_.contains(id); }
  int64_t length(SeqId id) const override { return blocks_.length(id); }
  int64_t cached_tokens(SeqId id) const override { return blocks_.shared_tokens(id); }
  int64_t sequences() const override { return blocks_.sequences(); }

  int64_t pool_bytes() const override;
  int64_t assigned_bytes() const override;
  int64_t peak_assigned_bytes() const override;
  int64_t tokens_stored() const override { return blocks_.tokens_stored(); }
  int64_t peak_tokens_stored() const override { return blocks_.peak_tokens_stored(); }

 protected:
  void locate(SeqId id, KvSeqView& s) const override;
  int64_t region_tokens() const override { return blocks_.block_tokens(); }

 private:
  BlockManager blocks_;
  Buffer pool_;  // (N blocks, L sections of B slots) — kernels/kv_storage.h
};

}  // namespace gpuledger::kv
