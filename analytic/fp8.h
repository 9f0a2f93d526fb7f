// The bytes an FP8 run (--dtype fp8, the delayed-scaling recipe) adds to a
// rank's `weights` account, in closed form (docs/formulas/fp8.md,
// docs/exact-budget.md "FP8 weight copies and scaling state"). Analytic side:
// from the model, layout and run alone.
#pragma once
#include <cstdint>

#include "core/layout.h"
#include "core/model_config.h"
#include "core/run_config.h"

namespace gpuledger::analytic {

// Quantizers per GEMM of a TransformerEngine module: 3 in the forward (input,
// weight, output) and 2 in the backward (grad_output, grad_input)
// (module/base.py, init_fp8_meta_tensors, at d0067d0da6cb01811b8072a7d304f0e00344ce2b).
inline constexpr int64_t kFp8QuantizersPerGemm = 5;

// One FP8 GEMM's bytes beside its bf16 weight of `weight_elems` elements:
//   2·P            the weight's FP8 copy and its transpose (rowwise and
//                  columnwise data, kept across microbatches on Hopper);
//   4              the copy's scale_inv (fp32);
//   5·4·(1 + H)    each quantizer's fp32 scale and amax history of H entries.
int64_t fp8_gemm_state_bytes(int64_t weight_elems, int64_t amax_history_len);

// The blockwise recipe's scaling state of one GEMM whose weight is rows × cols
// on the rank: the fp32 scales of its FP8 copy's 128 × 128 blocks,
// ⌈rows/128⌉ × pad4(⌈cols/128⌉), and of its transpose's, ⌈cols/128⌉ ×
// pad4(⌈rows/128⌉) (TransformerEngine's Float8BlockQuantizer.get_scale_shape,
// pytorch/tensor/float8_blockwise_tensor.py at d0067d0d: scales padded to a
// multiple of 4 for the GEMM); no amax history. The copies are 2·rows·cols beside.
int64_t fp8_block_gemm_scaling_bytes(int64_t rows, int64_t cols);

// Σ over the layers' Linear GEMMs on `rank` (core/fp8.h fp8_gemms_of_role:
// QKV or MLA's projections, attention out, the MLP's — gpt in, llama gate and
// up —, MLP out, a MoE layer's routed experts one GEMM per expert held and its
// shared experts; the router, the LM head and the embedding stay bf16 as in
// Megatron-LM); 0 when the run is not fp8.
int64_t fp8_weight_state_bytes(const ModelConfig& m, const Layout& l, const RunConfig& r, int64_t rank);

}  // namespace gpuledger::analytic
