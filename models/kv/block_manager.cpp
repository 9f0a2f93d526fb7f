// BlockManager (models/kv/block_manager.h): the free list, block tables,
// reference counts and the in-use / stored counters of a paged KV cache.
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
  ref_.assign(static_cast<size_t>(num_blocks), 0);
  filled_.assign(static_cast<size_t>(num_blocks), 0);
  // Block 0 is the null block: never on the free list.
  for (int64_t b = 1; b < num_blocks; ++b) free_.push_back(static_cast<int32_t>(b));
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

int32_t BlockManager::take_block() {
  const int32_t b = free_.front();
  free_.pop_front();
  ref_[static_cast<size_t>(b)] = 1;
  filled_[static_cast<size_t>(b)] = 0;
  return b;
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
  int64_t shared_blocks = 0;
  const Seq* src = nullptr;
  if (prefix) {
    if (window_) throw std::invalid_argument("prefix sharing needs a cache without a sliding window");
    src = &seq(prefix->source);
    if (prefix->tokens < 0 || prefix->tokens > src->len)
      throw std::invalid_argument("prefix of " + std::to_string(prefix->tokens) + " tokens, but sequence " +
                                  std::to_string(prefix->source) + " holds " + std::to_string(src->len));
    // Full blocks only, and at least the last token left to compute.
    shared_blocks = std::min(prefix->tokens, tokens - 1) / block_tokens_;
  }
  const int64_t need = blocks_for(tokens) - shared_blocks;
  if (need > free_blocks()) return false;

  Seq s;
  s.len = tokens;
  s.shared = shared_blocks * block_tokens_;
  for (int64_t k = 0; k < shared_blocks; ++k) {
    const int32_t b = src->table[static_cast<size_t>(k)];
    ++ref_[static_cast<size_t>(b)];
    s.table.push_back(b);
  }
  for (int64_t k = 0; k < need; ++k) s.table.push_back(take_block());
  refill(s, static_cast<size_t>(shared_blocks));  // shared blocks are full: their tokens are counted already
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
  note_peaks();
  return true;
}

void BlockManager::free_sequence(SeqId id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) throw std::out_of_range("no KV sequence " + std::to_string(id));
  for (int32_t b : it->second.table) {
    if (--ref_[static_cast<size_t>(b)] == 0) {
      tokens_ -= filled_[static_cast<size_t>(b)];
      filled_[static_cast<size_t>(b)] = 0;
      free_.push_back(b);
    }
  }
  seqs_.erase(it);
}

}  // namespace gpuledger::kv
