// The KV cache layer by layer and vLLM's grouping of hybrid models (see
// kv_layers.h). Written from the config and layout alone.
#include "analytic/kv_layers.h"

#include <algorithm>
#include <map>

#include "core/attention_pattern.h"
#include "core/checked_math.h"
#include "core/int_math.h"

namespace gpuledger::analytic {

std::vector<std::optional<int64_t>> stage_layer_caps(const ModelConfig& m, const Layout& l, int64_t stage,
                                                     const KvEviction& eviction) {
  std::vector<std::optional<int64_t>> caps;
  const int64_t count = layers_per_chunk(m, l, stage);
  for (int64_t chunk = 0; chunk < l.vpp; ++chunk)
    for (const auto& w : layer_windows(m, first_layer_of_chunk(m, l, stage, chunk), count))
      caps.push_back(kv_slot_cap(w, eviction));
  return caps;
}

int64_t kv_layer_slots(const ModelConfig& m, const Layout& l, int64_t stage, const KvEviction& eviction,
                       int64_t context) {
  int64_t slots = 0;
  for (const auto& cap : stage_layer_caps(m, l, stage, eviction))
    slots = checked_add(slots, cap ? std::min(context, *cap) : context, "KV layer-token slots");
  return slots;
}

KvGroups kv_groups(const ModelConfig& m, const Layout& l, int64_t stage, const KvEviction& eviction) {
  // Layers by cap, a full layer (no cap) first: vLLM groups "same_type_layers"
  // by their KV cache spec; the order of groups changes no figure.
  std::map<int64_t, int64_t> by_cap;  // cap (−1: none) → layers
  for (const auto& cap : stage_layer_caps(m, l, stage, eviction)) ++by_cap[cap ? *cap : -1];
  int64_t fewest = INT64_MAX, most = 0;
  for (const auto& [cap, n] : by_cap) {
    fewest = std::min(fewest, n);
    most = std::max(most, n);
  }
  KvGroups g;
  // "max_num_layers < min_num_layers * 1.5": in integers, 2·most < 3·fewest.
  g.group_size = 2 * most < 3 * fewest ? most : fewest;
  for (const auto& [cap, n] : by_cap) {
    const std::optional<int64_t> c = cap < 0 ? std::nullopt : std::optional<int64_t>(cap);
    // ⌈n / group_size⌉ groups; vLLM gives group i the layers i, i + k, i + 2k, …
    // (layers[i::num_groups]), so the padding spreads over the groups.
    const int64_t k = ceil_div(n, g.group_size);
    for (int64_t i = 0; i < k; ++i) g.groups.push_back({c, ceil_div(n - i, k)});
  }
  return g;
}

int64_t kv_group_blocks(const KvGroups& g, int64_t context, int64_t block) {
  int64_t blocks = 0;
  for (const auto& grp : g.groups)
    blocks = checked_add(blocks, ceil_div(grp.cap ? std::min(context, *grp.cap) : context, block), "KV blocks");
  return blocks;
}

}  // namespace gpuledger::analytic
