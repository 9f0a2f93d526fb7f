// Eviction under a KV budget (core/kv_types.h, KvEviction): which slot a new
// token takes once a sequence holds `budget` tokens, for the policies that
// keep a scattered set of positions — attention sinks and heavy hitters. The
// window policy needs no state: it is a rolling buffer (slot p mod budget,
// kernels/kv_storage.h), as a sliding-window model's cache.
//
//   sink  StreamingLLM (Xiao et al. 2024, "Efficient streaming language
//         models with attention sinks", §3.2): the first `sink_tokens` tokens
//         stay, and of the rest the most recent budget − sink_tokens; the new
//         token takes the slot of the oldest non-sink token.
//   h2o   H2O (Zhang et al. 2023, "H2O: heavy-hitter oracle for efficient
//         generative inference of large language models", §4, Algorithm 1):
//         every kept token accumulates the attention weight the queries give
//         it; the cache keeps the most recent h2o_recent_tokens() tokens and,
//         among the older ones, those with the largest accumulated weight. The
//         new token takes the slot of the older token with the smallest sum
//         (ties: the oldest), and starts from 0.
//
// Granularity. The slot maps are per sequence (sink: one for every layer) or
// per sequence and layer (h2o: each layer's scores decide its own evictions),
// with scores summed over the layer's query heads — H2O's reference keeps one
// set per head; here a token's K and V of every head share a slot, as the
// paged layout stores them. The decision is taken when the token is appended,
// before its step runs, so a cache never holds more than `budget` tokens (H2O's
// reference appends, attends, then evicts: one token over for a moment). A
// prompt longer than the budget is prefilled up to the budget in one chunk,
// then a token per step (KvCache::max_step_tokens), each evicting as it comes.
//
// Maps are built when a sequence's data is first read or written
// (slot_positions): a sequence that is only counted (a capacity fill) holds a
// length alone. Before anything attends, every score is 0, so the kept set of
// such a sequence is that of zero scores: the sinks and the newest tokens.
// On a backend that reads no data (meta) scores stay 0 and one map serves
// every layer.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "core/kv_types.h"
#include "models/kv/block_manager.h"

namespace gpuledger::kv {

class KvEvictionState {
 public:
  // `per_layer_scores`: keep h2o's maps and scores per layer (a backend whose
  // attention writes scores); otherwise one map for all layers.
  KvEvictionState(KvEviction eviction, int64_t layers, bool per_layer_scores);

  const KvEviction& eviction() const { return e_; }
  // Whether the policy keeps a scattered set of positions (sink, h2o).
  bool scattered() const { return e_.policy == KvPolicy::kSink || e_.policy == KvPolicy::kH2O; }
  // Whether the attention of `layer` should add its weights into scores(…).
  bool wants_scores() const { return e_.policy == KvPolicy::kH2O && per_layer_; }

  void add(SeqId id, int64_t tokens);
  void append(SeqId id, int64_t tokens);
  void erase(SeqId id);

  // The position each slot of sequence `id` holds at `layer` (its size: the
  // slots held, min(length, budget)); built on first use.
  const std::vector<int64_t>& slot_positions(SeqId id, int64_t layer);
  // The accumulated attention weight of each slot (h2o, per layer); nullptr
  // when the policy keeps none.
  float* scores(SeqId id, int64_t layer);

  // (The tokens given up are counted by the cache that owns this state: KvCache::evicted_tokens.)

 private:
  struct Map {
    std::vector<int64_t> positions;  // slot → position
    std::vector<float> scores;       // slot → accumulated weight (h2o)
  };
  struct Seq {
    int64_t len = 0;
    std::vector<Map> maps;  // empty until first use; one, or one per layer
  };
  Seq& seq(SeqId id);
  void build(Seq& s) const;
  // Puts position p (the sequence's next) in `m`, evicting one token when full.
  void place(Map& m, int64_t p) const;
  int64_t victim(const Map& m, int64_t p) const;

  KvEviction e_;
  int64_t layers_;
  bool per_layer_;
  std::unordered_map<SeqId, Seq> seqs_;
};

}  // namespace gpuledger::kv
