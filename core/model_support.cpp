// See model_support.h.
#include "core/model_support.h"

#include <string>
#include <utility>

namespace gpuledger {

void require_runnable_model(const ModelConfig& m, const Layout& l, const RunConfig& r, ModelUse use) {
  const std::string model = "model '" + m.name + "'";
  // The DeepSeek pieces no layer code builds: refused by every command that
  // runs the layers or budgets them, accepted where only the cache and the
  // weights are sized.
  const std::pair<const char*, bool> unbuilt[] = {{"kv_lora_rank", m.is_mla()}};
  for (const auto& [field, set] : unbuilt) {
    if (!set) continue;
    if (use == ModelUse::kKvSizing) return;
    throw ConfigError(field, model + " has " +
                                 (m.is_mla() ? std::string("multi-head latent attention (kv_lora_rank)")
                                             : std::string("DeepSeek-MoE's ") + field) +
                                 ", which training, plan and infer do not build yet: kv and serve-plan size it");
  }
  if (m.qk_norm && l.tp > 1)
    throw ConfigError("qk_norm", model + " has QK norm (Qwen3), whose γ gradient the runs do not sum over " +
                                     "tensor-parallel ranks yet: give tp 1, got tp " + std::to_string(l.tp));
  if (!m.is_moe()) return;
  // The first dense_layers layers hold a dense MLP, the rest the sparse block:
  // model chunks of different sizes, whose interleaved peak (pairs in flight ×
  // one chunk's layers, docs/exact-budget.md "Interleaved stages") is not built.
  if (m.dense_layers > 0 && l.vpp > 1)
    throw ConfigError("dense_layers", model + " has " + std::to_string(m.dense_layers) +
                                          " dense layers before its MoE layers: interleaved stages (--vpp " +
                                          std::to_string(l.vpp) + ") are built for models whose layers are alike");
  if (l.tp > 1)
    throw ConfigError("num_experts", model + " is a mixture of experts: the runs build it with data, expert and " +
                                         "pipeline parallelism only (tp = 1), got tp " + std::to_string(l.tp));
}

void override_capacity_factor(ModelConfig& m, double capacity_factor) {
  if (!m.is_moe())
    throw ConfigError("capacity_factor", "--capacity-factor needs a mixture-of-experts model; " + m.name + " is dense");
  m.capacity_factor = capacity_factor;
  validate_model_config(m);
}

}  // namespace gpuledger
