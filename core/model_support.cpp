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
  const std::pair<const char*, bool> unbuilt[] = {
      {"kv_lora_rank", m.is_mla()}, {"dense_layers", m.dense_layers > 0}, {"router_bias", m.router_bias}};
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
