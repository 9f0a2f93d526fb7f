// The KV cache of a stage's layers one by one (docs/formulas/kv.md "Layers of
// different windows"): each layer keeps min(context, cap) tokens, its cap the
// smaller of its own sliding window and the KV budget (none for a full layer
// without a budget); and the groups a paged cache manages them in, as vLLM's
// hybrid KV cache manager forms them. Pure functions of config and layout.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "core/kv_types.h"
#include "core/layout.h"
#include "core/model_config.h"

namespace gpuledger::analytic {

// Each layer of pipeline stage `stage`'s cap, in layer order (every chunk under vpp).
std::vector<std::optional<int64_t>> stage_layer_caps(const ModelConfig& m, const Layout& l, int64_t stage,
                                                     const KvEviction& eviction);

// Σ over the stage's layers of min(context, cap): the layer-token slots one
// sequence of `context` tokens holds (L · min(context, W) when every layer
// shares one cap W).
int64_t kv_layer_slots(const ModelConfig& m, const Layout& l, int64_t stage, const KvEviction& eviction,
                       int64_t context);

// vLLM's KV cache groups of one stage (vllm/v1/core/kv_cache_utils.py,
// _get_kv_cache_groups_uniform_page_size, at commit
// 001cabc1be16a59a70d720ed61a13b678c060a18): the layers of each cap form
// ⌈n_cap / group_size⌉ groups of group_size layer slots (padding where n_cap
// does not divide),
// group_size the fewest layers of any cap — or the most, when the most is
// under 1.5 × the fewest. Every group has its own block table; a block holds
// `block` tokens of group_size layers, so all groups share one pool of
// equal blocks. A model of one cap is one group of all its layers. Under
// pipeline parallelism vLLM forms the groups over the whole model and projects
// them onto each stage (get_kv_cache_configs); these are formed over the
// stage's own layers — the same whenever pp = 1 or each stage repeats the
// model's pattern.
struct KvGroup {
  std::optional<int64_t> cap;  // the group's layers' cap (none: every token)
  int64_t layers = 0;          // real layers in the group (<= group_size; the rest is padding)
};
struct KvGroups {
  int64_t group_size = 0;  // layer slots per block
  std::vector<KvGroup> groups;
};
KvGroups kv_groups(const ModelConfig& m, const Layout& l, int64_t stage, const KvEviction& eviction);

// Blocks of `block` tokens one sequence of `context` tokens takes: Σ over the
// groups of ⌈min(context, cap) / block⌉.
int64_t kv_group_blocks(const KvGroups& g, int64_t context, int64_t block);

}  // namespace gpuledger::analytic
