// FP8 weight copies and scaling state (see fp8_weights.h).
#include "models/transformer/fp8_weights.h"

#include "core/account.h"
#include "core/fp8.h"
#include "core/int_math.h"

namespace gpuledger {

namespace {

int64_t blocks(int64_t n) { return ceil_div(n, kFp8BlockLen); }
int64_t padded_to_4(int64_t n) { return ceil_div(n, 4) * 4; }

// One GEMM's scaling state beside its weight of rows × cols (fp8_weights.h).
int64_t scaling_bytes(Fp8Recipe recipe, int64_t rows, int64_t cols, int64_t amax_history_len) {
  if (recipe == Fp8Recipe::kBlockwise) {  // the rowwise copy's (row blocks, col blocks→4) and the transpose's
    return 4 * (blocks(rows) * padded_to_4(blocks(cols)) + blocks(cols) * padded_to_4(blocks(rows)));
  }
  constexpr int64_t kQuantizers = 5;  // forward input, weight, output; backward grad_output, grad_input
  return 4 + kQuantizers * 4 * (1 + amax_history_len);
}

}  // namespace

Fp8WeightState::Fp8WeightState(Device& device, const ParamLayout& layout, Fp8Recipe recipe, int64_t amax_history_len,
                               int64_t local_experts) {
  for (const UnitLayout& unit : layout.units) {
    if (unit.name.rfind("layer.", 0) != 0) continue;
    for (const TensorSlot& t : unit.tensors) {
      const int64_t gemms = fp8_gemms_of_role(t.role, local_experts);
      if (gemms == 0 || t.elems() == 0) continue;
      // a stacked experts' tensor: each expert's rows / gemms × cols weight a GEMM of its own
      const int64_t per_gemm = scaling_bytes(recipe, t.rows / gemms, t.cols, amax_history_len);
      buffers_.push_back(device.alloc(t.elems(), Account::kWeights, "fp8.weight"));
      buffers_.push_back(device.alloc(t.elems(), Account::kWeights, "fp8.weight_t"));
      buffers_.push_back(device.alloc(gemms * per_gemm, Account::kWeights, "fp8.scaling"));
      gemms_ += gemms;
    }
  }
}

}  // namespace gpuledger
