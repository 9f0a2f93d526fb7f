// FP8 weight copies and scaling state (see fp8_weights.h).
#include "models/transformer/fp8_weights.h"

#include "core/account.h"
#include "core/fp8.h"

namespace gpuledger {

Fp8WeightState::Fp8WeightState(Device& device, const ParamLayout& layout, int64_t amax_history_len,
                               int64_t local_experts) {
  constexpr int64_t kQuantizers = 5;  // forward input, weight, output; backward grad_output, grad_input
  const int64_t scaling_bytes = 4 + kQuantizers * 4 * (1 + amax_history_len);
  for (const UnitLayout& unit : layout.units) {
    if (unit.name.rfind("layer.", 0) != 0) continue;
    for (const TensorSlot& t : unit.tensors) {
      const int64_t gemms = fp8_gemms_of_role(t.role, local_experts);
      if (gemms == 0 || t.elems() == 0) continue;
      buffers_.push_back(device.alloc(t.elems(), Account::kWeights, "fp8.weight"));
      buffers_.push_back(device.alloc(t.elems(), Account::kWeights, "fp8.weight_t"));
      buffers_.push_back(device.alloc(gemms * scaling_bytes, Account::kWeights, "fp8.scaling"));
      gemms_ += gemms;
    }
  }
}

}  // namespace gpuledger
