// KvCache, ContiguousKvCache and PagedKvCache (models/kv/kv_cache.h): the
// allocations booked in the kv account, admission, the per-layer views the KV
// ops read and write through, and the pool / assigned / token-bytes figures.
#include "models/kv/kv_cache.h"

#include <algorithm>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>

namespace gpuledger::kv {

// ---- KvCache ----

KvCache::KvCache(Device& device, KvGeometry geometry, std::optional<int64_t> window, KvEviction eviction)
    : device_(device), geom_(geometry), slot_cap_(kv_slot_cap(window, eviction)), eviction_(eviction) {
  if (geom_.layers < 1 || geom_.kv_heads < 1 || geom_.head_dim < 1)
    throw std::invalid_argument("KV cache geometry needs layers, kv heads and head dim >= 1, got (" +
                                std::to_string(geom_.layers) + ", " + std::to_string(geom_.kv_heads) + ", " +
                                std::to_string(geom_.head_dim) + ")");
  if (slot_cap_ && *slot_cap_ < 1)
    throw std::invalid_argument("KV window must be >= 1, got " + std::to_string(*slot_cap_));
  if (eviction_.policy == KvPolicy::kSink || eviction_.policy == KvPolicy::kH2O) {
    if (window)
      throw std::invalid_argument(std::string("KV policy ") + std::string(kv_policy_name(eviction_.policy)) +
                                  " on a sliding-window model (its window already bounds the cache)");
    evict_.emplace(eviction_, geom_.layers, device_.touches_memory());
  }
  // Scales that do not grow with tokens: one buffer, (L, K|V, per-layer count) fp32.
  if (geom_.fixed_scale_bytes() > 0)
    fixed_scales_ = device_.alloc(geom_.fixed_scale_bytes(), Account::kKv, "kv.fixed_scales");
  calibrated_.assign(static_cast<size_t>(geom_.layers), false);
}

int64_t KvCache::max_step_tokens(SeqId id) const {
  if (!slot_cap_) return std::numeric_limits<int64_t>::max();
  return std::max<int64_t>(1, *slot_cap_ - length(id));
}

KvCacheView KvCache::view(int64_t layer, const std::vector<SeqStep>& batch) const {
  if (layer < 0 || layer >= geom_.layers)
    throw std::out_of_range("KV layer " + std::to_string(layer) + " of " + std::to_string(geom_.layers));
  KvCacheView c;
  c.format = geom_.format;
  c.scales = geom_.scales;
  c.Hkv = geom_.kv_heads;
  c.D = geom_.head_dim;
  c.group = geom_.group;
  c.block_tokens = region_tokens();
  c.block_bytes = region_bytes();
  c.layer_offset_bytes = layer * c.block_tokens * geom_.layer_token_bytes();
  // A scattered policy's slot maps go to a backend that reads the data; to
  // one that does not, the cap as a rolling window (same slots, same FLOPs).
  const bool maps = evict_ && device_.touches_memory();
  c.window = maps ? std::nullopt : slot_cap_;
  const int64_t nf = geom_.fixed_scales_per_layer();
  if (nf > 0 && fixed_scales_.data() != nullptr) c.fixed_scales = fixed_scales_.as<float>() + layer * 2 * nf;
  std::set<SeqId> seen;
  c.seqs.reserve(batch.size());
  for (const SeqStep& st : batch) {
    if (!contains(st.id)) throw std::out_of_range("no KV sequence " + std::to_string(st.id));
    if (!seen.insert(st.id).second)
      throw std::invalid_argument("KV sequence " + std::to_string(st.id) + " twice in one step");
    KvSeqView s;
    s.len = length(st.id);
    s.n_new = st.n_new;
    if (st.n_new < 0 || st.n_new > s.len)
      throw std::invalid_argument("KV sequence " + std::to_string(st.id) + ": " + std::to_string(st.n_new) +
                                  " new tokens of " + std::to_string(s.len));
    // A shared prefix block is read by other sequences: never written again.
    if (s.len - st.n_new < cached_tokens(st.id))
      throw std::invalid_argument("KV sequence " + std::to_string(st.id) + ": new tokens from position " +
                                  std::to_string(s.len - st.n_new) + " fall inside its shared prefix of " +
                                  std::to_string(cached_tokens(st.id)) + " tokens");
    locate(st.id, s);
    if (maps) {
      s.slot_positions = evict_->slot_positions(st.id, layer);
      s.slot_scores = evict_->scores(st.id, layer);
    }
    c.seqs.push_back(std::move(s));
  }
  validate_kv_view(c, "KvCache::view");
  return c;
}

void KvCache::write(int64_t layer, const std::vector<SeqStep>& batch, const void* k, const void* v, DType t) {
  const KvCacheView c = view(layer, batch);
  // Fixed scales are set by the first write that carries tokens, then kept.
  const bool calibrate = c.fixed_per_tensor() > 0 && !calibrated_[static_cast<size_t>(layer)] && c.new_tokens() > 0;
  device_.kv_cache_write(c, k, v, t, calibrate);
  if (calibrate) calibrated_[static_cast<size_t>(layer)] = true;
}

void KvCache::attend(int64_t layer, const std::vector<SeqStep>& batch, void* out, const void* q, DType t,
                     int64_t q_heads) {
  const KvCacheView c = view(layer, batch);
  if (c.fixed_per_tensor() > 0 && !calibrated_[static_cast<size_t>(layer)] && c.new_tokens() > 0)
    throw std::logic_error("KV layer " + std::to_string(layer) +
                           ": attention before any write (its fixed scales are not set)");
  device_.cached_attention(out, q, t, q_heads, c);
}

// ---- ContiguousKvCache ----

ContiguousKvCache::ContiguousKvCache(Device& device, KvGeometry geometry, int64_t max_model_len,
                                     std::optional<int64_t> window, std::optional<int64_t> budget_bytes,
                                     KvEviction eviction)
    : KvCache(device, geometry, window, eviction), max_model_len_(max_model_len), budget_(budget_bytes) {
  if (max_model_len < 1)
    throw std::invalid_argument("max_model_len must be >= 1, got " + std::to_string(max_model_len));
  slots_ = kept(max_model_len);
}

bool ContiguousKvCache::can_admit(int64_t prompt_tokens) const {
  if (prompt_tokens < 1 || prompt_tokens > max_model_len_) return false;
  return !budget_ || geom_.fixed_scale_bytes() + (sequences() + 1) * reservation_bytes() <= *budget_;
}

bool ContiguousKvCache::add_sequence(SeqId id, int64_t prompt_tokens, std::optional<PrefixRef> prefix) {
  if (contains(id)) throw std::invalid_argument("KV sequence " + std::to_string(id) + " already exists");
  if (prompt_tokens < 1 || prompt_tokens > max_model_len_)
    throw std::invalid_argument("a prompt of " + std::to_string(prompt_tokens) + " tokens does not fit max_model_len " +
                                std::to_string(max_model_len_));
  // Reservations are private: a prefix is never shared (cached_tokens = 0).
  if (prefix && !contains(prefix->source))
    throw std::out_of_range("no KV sequence " + std::to_string(prefix->source) + " to share a prefix from");
  if (!can_admit(prompt_tokens)) return false;
  Seq s;
  s.reservation = device_.alloc(reservation_bytes(), Account::kKv, "kv.reservation");
  s.len = prompt_tokens;
  seqs_.emplace(id, std::move(s));
  track_add(id, prompt_tokens);
  tokens_ += kept(prompt_tokens);
  peak_tokens_ = std::max(peak_tokens_, tokens_);
  peak_seqs_ = std::max(peak_seqs_, sequences());
  return true;
}

bool ContiguousKvCache::append_tokens(SeqId id, int64_t tokens) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) throw std::out_of_range("no KV sequence " + std::to_string(id));
  if (tokens < 0) throw std::invalid_argument("cannot append " + std::to_string(tokens) + " tokens");
  Seq& s = it->second;
  if (s.len + tokens > max_model_len_)
    throw std::invalid_argument("KV sequence " + std::to_string(id) + " would reach " + std::to_string(s.len + tokens) +
                                " tokens, over max_model_len " + std::to_string(max_model_len_));
  tokens_ += kept(s.len + tokens) - kept(s.len);
  s.len += tokens;
  track_append(id, tokens);
  peak_tokens_ = std::max(peak_tokens_, tokens_);
  return true;
}

void ContiguousKvCache::free_sequence(SeqId id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) throw std::out_of_range("no KV sequence " + std::to_string(id));
  tokens_ -= kept(it->second.len);
  seqs_.erase(it);  // the reservation's Buffer unbooks the ledger
  track_free(id);
}

int64_t ContiguousKvCache::length(SeqId id) const {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) throw std::out_of_range("no KV sequence " + std::to_string(id));
  return it->second.len;
}

int64_t ContiguousKvCache::cached_tokens(SeqId id) const {
  if (!contains(id)) throw std::out_of_range("no KV sequence " + std::to_string(id));
  return 0;
}

int64_t ContiguousKvCache::pool_bytes() const { return geom_.fixed_scale_bytes() + sequences() * reservation_bytes(); }

int64_t ContiguousKvCache::peak_assigned_bytes() const {
  return geom_.fixed_scale_bytes() + peak_seqs_ * reservation_bytes();
}

void ContiguousKvCache::locate(SeqId id, KvSeqView& s) const {
  s.base = seqs_.at(id).reservation.data();
  s.blocks.assign(1, 0);  // one region per sequence
}

// ---- PagedKvCache ----

PagedKvCache::PagedKvCache(Device& device, KvGeometry geometry, int64_t num_blocks, int64_t block_tokens,
                           std::optional<int64_t> window, KvEviction eviction)
    : KvCache(device, geometry, window, eviction), blocks_(num_blocks, block_tokens, slot_cap_) {
  // The whole pool up front, as vLLM allocates its KV tensors once at start.
  pool_ = device_.alloc(num_blocks * block_bytes(), Account::kKv, "kv.pool");
}

int64_t PagedKvCache::blocks_in(int64_t bytes, const KvGeometry& g, int64_t block_tokens) {
  if (block_tokens < 1)
    throw std::invalid_argument("a KV block must hold >= 1 token, got " + std::to_string(block_tokens));
  const int64_t avail = bytes - g.fixed_scale_bytes();
  return avail > 0 ? avail / (block_tokens * g.token_bytes()) : 0;
}

bool PagedKvCache::add_sequence(SeqId id, int64_t prompt_tokens, std::optional<PrefixRef> prefix) {
  if (!blocks_.add_sequence(id, prompt_tokens, std::move(prefix))) return false;
  track_add(id, prompt_tokens);
  return true;
}

bool PagedKvCache::append_tokens(SeqId id, int64_t tokens) {
  if (!blocks_.append(id, tokens)) return false;
  track_append(id, tokens);
  return true;
}

void PagedKvCache::free_sequence(SeqId id) {
  blocks_.free_sequence(id);
  track_free(id);
}

int64_t PagedKvCache::pool_bytes() const { return geom_.fixed_scale_bytes() + blocks_.num_blocks() * block_bytes(); }

int64_t PagedKvCache::assigned_bytes() const {
  return geom_.fixed_scale_bytes() + (blocks_.blocks_in_use() + 1) * block_bytes();
}

int64_t PagedKvCache::peak_assigned_bytes() const {
  return geom_.fixed_scale_bytes() + (blocks_.peak_blocks_in_use() + 1) * block_bytes();
}

void PagedKvCache::locate(SeqId id, KvSeqView& s) const {
  s.base = pool_.data();
  s.blocks = blocks_.block_table(id);
}

}  // namespace gpuledger::kv
