// FP8 weight copies and scaling state (see fp8_weights.h).
#include "models/transformer/fp8_weights.h"

#include <algorithm>

#include "core/account.h"

namespace gpuledger {

Fp8WeightState::Fp8WeightState(Device& device, const ParamLayout& layout, int64_t amax_history_len) {
  constexpr int64_t kQuantizers = 5;  // forward input, weight, output; backward grad_output, grad_input
  const int64_t scaling_bytes = 4 + kQuantizers * 4 * (1 + amax_history_len);
  for (const UnitLayout& unit : layout.units) {
    if (unit.name.rfind("layer.", 0) != 0) continue;
    for (const TensorSlot& t : unit.tensors) {
      if (std::find(kFp8LinearRoles.begin(), kFp8LinearRoles.end(), t.role) == kFp8LinearRoles.end()) continue;
      const int64_t elems = t.rows * t.cols;
      buffers_.push_back(device.alloc(elems, Account::kWeights, "fp8.weight"));
      buffers_.push_back(device.alloc(elems, Account::kWeights, "fp8.weight_t"));
      buffers_.push_back(device.alloc(scaling_bytes, Account::kWeights, "fp8.scaling"));
      ++gemms_;
    }
  }
}

}  // namespace gpuledger
