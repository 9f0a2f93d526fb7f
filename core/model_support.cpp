// See model_support.h.
#include "core/model_support.h"

#include <string>

namespace gpuledger {

void require_runnable_model(const ModelConfig& m, const Layout&, const RunConfig&) {
  const std::string model = "model '" + m.name + "'";
  if (m.qk_norm) throw ConfigError("qk_norm", model + " has QK norm (Qwen3), which the runs do not implement yet");
  if (!m.is_moe()) return;
  throw ConfigError("num_experts", model + " is a mixture of experts: train, plan and infer do not build MoE " +
                                       "layers yet (expert parallelism not implemented); `gpuledger models` lists " +
                                       "its counts");
}

}  // namespace gpuledger
