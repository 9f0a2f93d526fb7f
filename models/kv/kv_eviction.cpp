// KvEvictionState (models/kv/kv_eviction.h): the slot maps of the sink and
// h2o policies, their victims, and H2O's accumulated scores.
#include "models/kv/kv_eviction.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace gpuledger::kv {

KvEvictionState::KvEvictionState(KvEviction eviction, int64_t layers, bool per_layer_scores)
    : e_(eviction), layers_(layers), per_layer_(per_layer_scores && eviction.policy == KvPolicy::kH2O) {
  if (!scattered()) return;
  if (e_.budget < 1) throw std::invalid_argument("a KV budget must be >= 1 token, got " + std::to_string(e_.budget));
  if (e_.policy == KvPolicy::kSink && (e_.sink_tokens < 0 || e_.sink_tokens >= e_.budget))
    throw std::invalid_argument("sink tokens must lie in [0, budget " + std::to_string(e_.budget) + "), got " +
                                std::to_string(e_.sink_tokens));
  if (layers < 1) throw std::invalid_argument("KV eviction needs >= 1 layer");
}

KvEvictionState::Seq& KvEvictionState::seq(SeqId id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) throw std::out_of_range("no KV sequence " + std::to_string(id) + " under eviction");
  return it->second;
}

void KvEvictionState::add(SeqId id, int64_t tokens) {
  if (!seqs_.emplace(id, Seq{}).second) throw std::invalid_argument("KV sequence " + std::to_string(id) + " twice");
  append(id, tokens);
}

void KvEvictionState::append(SeqId id, int64_t tokens) {
  Seq& s = seq(id);
  for (int64_t k = 0; k < tokens && !s.maps.empty(); ++k)
    for (Map& m : s.maps) place(m, s.len + k);
  s.len += tokens;
}

void KvEvictionState::erase(SeqId id) { seqs_.erase(id); }

// Before anything attends every score is 0: the kept set is the sinks and the
// newest tokens (sink), or the newest `budget` tokens (h2o: the recent window,
// then the newest of the equal-scored older ones).
void KvEvictionState::build(Seq& s) const {
  Map m;
  const int64_t kept = std::min(s.len, e_.budget);
  const int64_t sinks = e_.policy == KvPolicy::kSink && s.len > e_.budget ? e_.sink_tokens : 0;
  for (int64_t p = 0; p < sinks; ++p) m.positions.push_back(p);
  for (int64_t p = s.len - (kept - sinks); p < s.len; ++p) m.positions.push_back(p);
  m.scores.assign(m.positions.size(), 0.0f);
  s.maps.assign(per_layer_ ? static_cast<size_t>(layers_) : 1, m);
}

int64_t KvEvictionState::victim(const Map& m, int64_t p) const {
  int64_t best = -1;
  if (e_.policy == KvPolicy::kSink) {  // the oldest token after the sinks
    for (size_t sl = 0; sl < m.positions.size(); ++sl) {
      const int64_t q = m.positions[sl];
      if (q >= e_.sink_tokens && (best < 0 || q < m.positions[static_cast<size_t>(best)]))
        best = static_cast<int64_t>(sl);
    }
  } else {  // h2o: outside the recent window p − recent + 1 … p, the smallest sum, then the oldest
    const int64_t recent_first = p - e_.h2o_recent_tokens() + 1;
    for (size_t sl = 0; sl < m.positions.size(); ++sl) {
      if (m.positions[sl] >= recent_first) continue;
      const auto b = static_cast<size_t>(best);
      if (best < 0 || m.scores[sl] < m.scores[b] || (m.scores[sl] == m.scores[b] && m.positions[sl] < m.positions[b]))
        best = static_cast<int64_t>(sl);
    }
  }
  // A full map always holds a candidate: budget − sink_tokens >= 1 non-sinks,
  // and at most recent − 1 of its tokens lie inside the new token's window.
  if (best < 0) throw std::logic_error("KV eviction found no victim for position " + std::to_string(p));
  return best;
}

void KvEvictionState::place(Map& m, int64_t p) const {
  if (static_cast<int64_t>(m.positions.size()) < e_.budget) {
    m.positions.push_back(p);
    m.scores.push_back(0.0f);
    return;
  }
  const auto sl = static_cast<size_t>(victim(m, p));
  m.positions[sl] = p;
  m.scores[sl] = 0.0f;
}

const std::vector<int64_t>& KvEvictionState::slot_positions(SeqId id, int64_t layer) {
  Seq& s = seq(id);
  if (s.maps.empty()) build(s);
  if (layer < 0 || layer >= layers_) throw std::out_of_range("KV layer " + std::to_string(layer));
  return s.maps[per_layer_ ? static_cast<size_t>(layer) : 0].positions;
}

float* KvEvictionState::scores(SeqId id, int64_t layer) {
  if (!wants_scores()) return nullptr;
  Seq& s = seq(id);
  if (s.maps.empty()) build(s);
  return s.maps[static_cast<size_t>(layer)].scores.data();
}

}  // namespace gpuledger::kv
