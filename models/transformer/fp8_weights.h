// The FP8 state an fp8 run holds beside the bf16 parameters, per Linear GEMM
// of the rank's layers (core/fp8.h fp8_gemms_of_role: a routed-expert tensor
// is one GEMM per expert it holds), booked in `weights` (docs/exact-budget.md
// "FP8 weight copies and scaling state"), one buffer of each kind per tensor:
//   "fp8.weight"    the weight's FP8 copy, 1 byte per element, and
//   "fp8.weight_t"  its transpose — TransformerEngine's Linear keeps the rowwise
//                   and columnwise data of the cached weight for the backward
//                   on Hopper (module/linear.py, weight_quantizer.set_usage
//                   (rowwise=True, columnwise=...), cached across microbatches
//                   by is_first_microbatch, at d0067d0da6cb01811b8072a7d304f0e00344ce2b);
//   "fp8.scaling"   delayed recipe: the copy's fp32 scale_inv and, for each of
//                   the GEMM's five quantizers (forward input, weight, output;
//                   backward grad_output, grad_input: module/base.py), an fp32
//                   scale and an amax history of H fp32 entries
//                   (DelayedScalingRecipeState, quantization.py): 4 + 5·4·(1 + H)
//                   bytes per GEMM; blockwise recipe: the fp32 scales of the
//                   copy's 128 × 128 blocks and of its transpose's, each shaped
//                   as TE allocates them (Float8BlockQuantizer.get_scale_shape,
//                   tensor/float8_blockwise_tensor.py: rows of blocks, the other
//                   dimension's block count padded to a multiple of 4), and no
//                   amax history (the recipe keeps none).
// The CPU emulation casts each operand afresh (models/linear/linear.cpp): these
// buffers are held, as on a GPU, and not read.
#pragma once
#include <cstdint>
#include <vector>

#include "core/fp8.h"
#include "kernels/device.h"
#include "models/transformer/param_layout.h"

namespace gpuledger {

class Fp8WeightState {
 public:
  // Allocates the state of every FP8 GEMM of `layout`'s layer units, whose
  // MoE layers hold `local_experts` routed experts. Throws OutOfMemory.
  Fp8WeightState(Device& device, const ParamLayout& layout, Fp8Recipe recipe, int64_t amax_history_len,
                 int64_t local_experts);
  int64_t gemms() const { return gemms_; }

 private:
  std::vector<Buffer> buffers_;
  int64_t gemms_ = 0;
};

}  // namespace gpuledger
