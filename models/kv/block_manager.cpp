// BlockManager (models/kv/block_manager.h): the free queue with its cached
// blocks, block tables, reference counts, block hashes and the in-use / stored
// counters of a paged KV cache.
#include "models/kv/block_manager.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

namespace gpuledger::kv {

BlockManager::BlockManager(int64_t num_blocks, int64_t block_tokens, std::optional<int64_t> window)
    : num_blocks_(num_blocks), block_tokens_(block_tokens), window_(window) {
  if (num_blocks < 1 || num_blocks > std::numeric_limits<int32_t>::max())
    throw std::invalid_argument("a block pool needs 1 … 2^31 − 1 blocks (the null block among them), got " +
                                std::to_string(num_blocks));
  if (block_tokens < 1)
    throw std::invalid_argument("a KV block must hold >= 1 token, got " + std::to_string(block_tokens));
  if (window && *window < 1) throw std::invalid_argument("window must be >= 1, got " + std::to_string(*window));
  const auto n = static_cast<size_t>(num_blocks);
  ref_.assign(n, 0);
  filled_.assign(n, 0);
  queue_pos_.resize(n);
  hash_of_.assign(n, std::nullopt);
  // Block 0 is the null block: never on the free queue.
  for (int64_t b = 1; b < num_blocks; ++b) {
    queue_pos_[static_cast<size_t>(b)] = free_.insert(free_.end(), static_cast<int32_t>(b));
  }
}

int64_t BlockManager::kept(int64_t tokens) const { return window_ ? std::min(tokens, *window_) : tokens; }

int64_t BlockManager::blocks_for(int64_t tokens) const {
  if (tokens < 0) throw std::invalid_argument("token count must be >= 0, got " + std::to_string(tokens));
  return (kept(tokens) + block_tokens_ - 1) / block_tokens_;
}

const BlockManager::Seq& BlockManager::seq(SeqId id) const {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) throw std::out_of_range("no KV sequence " + std::to_string(id));
  return it->second;
}

int64_t BlockManager::length(SeqId id) const { return seq(id).len; }
int64_t BlockManager::shared_tokens(SeqId id) const { return seq(id).shared; }
const std::vector<int32_t>& BlockManager::block_table(SeqId id) const { return seq(id).table; }

int64_t BlockManager::cached_prefix_blocks(const std::vector<BlockHash>& block_hashes, int64_t max_tokens) const {
  if (window_) return 0;  // a rolling buffer shares nothing
  const int64_t cap =
      std::min(static_cast<int64_t>(block_hashes.size()), std::max<int64_t>(max_tokens, 0) / block_tokens_);
  int64_t k = 0;
  while (k < cap && cached_.count(block_hashes[static_cast<size_t>(k)]) != 0) ++k;
  return k;
}

bool BlockManager::can_allocate(int64_t tokens, const std::vector<BlockHash>& block_hashes) const {
  const int64_t hits = cached_prefix_blocks(block_hashes, tokens - 1);
  int64_t hits_on_queue = 0;
  for (int64_t k = 0; k < hits; ++k)
    hits_on_queue += ref_[static_cast<size_t>(cached_.at(block_hashes[static_cast<size_t>(k)]))] == 0 ? 1 : 0;
  return blocks_for(tokens) - hits <= free_blocks() - hits_on_queue;
}

int32_t BlockManager::take_block() {
  const int32_t b = free_.front();
  free_.pop_front();
  const auto i = static_cast<size_t>(b);
  if (hash_of_[i]) {  // the least recently used cached block: its hash goes
    auto it = cached_.find(*hash_of_[i]);
    if (it != cached_.end() && it->second == b) cached_.erase(it);
    hash_of_[i].reset();
    ++evictions_;
  }
  ref_[i] = 1;
  filled_[i] = 0;
  return b;
}

void BlockManager::touch(int32_t b) {
  const auto i = static_cast<size_t>(b);
  if (ref_[i] == 0) {  // an eviction candidate: off the queue, its tokens stored again
    free_.erase(queue_pos_[i]);
    tokens_ += filled_[i];
  }
  ++ref_[i];
}

void BlockManager::cache_full_blocks(Seq& s) {
  const auto full =
      static_cast<size_t>(std::min<int64_t>(s.len / block_tokens_, static_cast<int64_t>(s.hashes.size())));
  for (size_t k = 0; k < std::min(full, s.table.size()); ++k) {
    const auto i = static_cast<size_t>(s.table[k]);
    if (hash_of_[i]) continue;
    // A block computed twice (two sequences filling the same content before
    // either was cached) stays private: the first one cached is the hit.
    if (cached_.emplace(s.hashes[k], s.table[k]).second) hash_of_[i] = s.hashes[k];
  }
}

void BlockManager::refill(Seq& s, size_t from_block) {
  const int64_t slots = kept(s.len);
  for (size_t k = from_block; k < s.table.size(); ++k) {
    int64_t& f = filled_[static_cast<size_t>(s.table[k])];
    const int64_t now = std::clamp<int64_t>(slots - static_cast<int64_t>(k) * block_tokens_, 0, block_tokens_);
    tokens_ += now - f;
    f = now;
  }
}

void BlockManager::note_peaks() {
  peak_blocks_ = std::max(peak_blocks_, blocks_in_use());
  peak_tokens_ = std::max(peak_tokens_, tokens_);
}

bool BlockManager::add_sequence(SeqId id, int64_t tokens, std::optional<PrefixRef> prefix) {
  if (contains(id)) throw std::invalid_argument("KV sequence " + std::to_string(id) + " already exists");
  if (tokens < 1) throw std::invalid_argument("a sequence needs >= 1 token, got " + std::to_string(tokens));
  std::vector<int32_t> shared;  // the leading blocks taken from the prefix
  Seq s;
  if (prefix && !prefix->block_hashes.empty()) {
    if (window_) throw std::invalid_argument("prefix caching needs a cache without a sliding window");
    const int64_t hits = cached_prefix_blocks(prefix->block_hashes, tokens - 1);
    for (int64_t k = 0; k < hits; ++k) shared.push_back(cached_.at(prefix->block_hashes[static_cast<size_t>(k)]));
    s.hashes = prefix->block_hashes;
  } else if (prefix) {
    if (window_) throw std::invalid_argument("prefix sharing needs a cache without a sliding window");
    const Seq& src = seq(prefix->source);
    if (prefix->tokens < 0 || prefix->tokens > src.len)
      throw std::invalid_argument("prefix of " + std::to_string(prefix->tokens) + " tokens, but sequence " +
                                  std::to_string(prefix->source) + " holds " + std::to_string(src.len));
    // Full blocks only, and at least the last token left to compute.
    const int64_t n = std::min(prefix->tokens, tokens - 1) / block_tokens_;
    shared.assign(src.table.begin(), src.table.begin() + n);
  }
  int64_t on_queue = 0;
  for (int32_t b : shared) on_queue += ref_[static_cast<size_t>(b)] == 0 ? 1 : 0;
  const int64_t need = blocks_for(tokens) - static_cast<int64_t>(shared.size());
  if (need > free_blocks() - on_queue) return false;

  s.len = tokens;
  s.shared = static_cast<int64_t>(shared.size()) * block_tokens_;
  for (int32_t b : shared) {
    touch(b);
    s.table.push_back(b);
  }
  for (int64_t k = 0; k < need; ++k) s.table.push_back(take_block());
  refill(s, shared.size());  // shared blocks are full: their tokens are counted already
  cache_full_blocks(s);
  seqs_.emplace(id, std::move(s));
  note_peaks();
  return true;
}

bool BlockManager::append(SeqId id, int64_t tokens) {
  if (tokens < 0) throw std::invalid_argument("cannot append " + std::to_string(tokens) + " tokens");
  auto it = seqs_.find(id);
  if (it == seqs_.end()) throw std::out_of_range("no KV sequence " + std::to_string(id));
  Seq& s = it->second;
  const int64_t need = blocks_for(s.len + tokens) - static_cast<int64_t>(s.table.size());
  if (need > free_blocks()) return false;
  // The block holding the current last slot may gain tokens; earlier ones are full.
  const int64_t slots = kept(s.len);
  const size_t from = static_cast<size_t>(slots > 0 ? (slots - 1) / block_tokens_ : 0);
  for (int64_t k = 0; k < need; ++k) s.table.push_back(take_block());
  s.len += tokens;
  refill(s, std::max(from, static_cast<size_t>(s.shared / block_tokens_)));
  cache_full_blocks(s);
  note_peaks();
  return true;
}

void BlockManager::free_sequence(SeqId id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) throw std::out_of_range("no KV sequence " + std::to_string(id));
  const auto& table = it->second.table;
  for (auto b = table.rbegin(); b != table.rend(); ++b) {  // tail first: evicted before the prefix
    const auto i = static_cast<size_t>(*b);
    if (--ref_[i] == 0) {
      tokens_ -= filled_[i];
      if (!hash_of_[i]) filled_[i] = 0;  // a cached block keeps its contents until evicted
      queue_pos_[i] = free_.insert(free_.end(), *b);
    }
  }
  seqs_.erase(it);
}

}  // namespace gpuledger::kv
