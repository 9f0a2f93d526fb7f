// Whether the Linear GEMMs (linear.h) run in FP8, and by which recipe: the
// recipe of the innermost Fp8GemmScope open on this thread (kNone: not FP8), as TransformerEngine's
// fp8_autocast turns on FP8 for the modules called inside it (pytorch/
// quantization.py at d0067d0da6cb01811b8072a7d304f0e00344ce2b). The training
// step opens one around each layer's forward and backward, so the LM head and
// the embedding stay bf16, as in Megatron-LM (its output layer is not a TE module).
#pragma once

#include "core/fp8.h"

namespace gpuledger {

class Fp8GemmScope {
 public:
  explicit Fp8GemmScope(Fp8Recipe recipe);
  ~Fp8GemmScope();
  Fp8GemmScope(const Fp8GemmScope&) = delete;
  Fp8GemmScope& operator=(const Fp8GemmScope&) = delete;

 private:
  Fp8Recipe previous_;
};

Fp8Recipe fp8_gemm_recipe();

}  // namespace gpuledger
