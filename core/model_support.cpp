// See model_support.h.
#include "core/model_support.h"

#include <string>

namespace gpuledger {

void require_runnable_model(const ModelConfig& m, const Layout& l, const RunConfig& r) {
  const std::string model = "model '" + m.name + "'";
  if (m.qk_norm && l.tp > 1)
    throw ConfigError("qk_norm", model + " has QK norm (Qwen3), whose γ gradient the runs do not sum over " +
                                     "tensor-parallel ranks yet: give tp 1, got tp " + std::to_string(l.tp));
  if (!m.is_moe()) return;
  if (l.dp > 1 || l.tp > 1 || l.pp > 1 || l.vpp > 1)
    throw ConfigError("num_experts", model + " is a mixture of experts: expert parallelism is not implemented yet, " +
                                         "so a MoE model runs on one rank (dp = tp = pp = 1), got dp " +
                                         std::to_string(l.dp) + ", tp " + std::to_string(l.tp) + ", pp " +
                                         std::to_string(l.pp));
  if (m.capacity_factor)
    throw ConfigError("capacity_factor", model +
                                             ": the runs budget dropless routing only; a capacity factor is not "
                                             "supported by train and plan yet (give \"capacity_factor\": null)");
  if (r.recompute == Recompute::kFull)
    throw ConfigError("num_experts", model + ": --recompute full is not implemented for MoE layers yet");
}

}  // namespace gpuledger
