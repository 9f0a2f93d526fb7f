// Whether the Linear GEMMs (linear.h) run in FP8: on while an Fp8GemmScope
// that asked for it is open on this thread, as TransformerEngine's
// fp8_autocast turns on FP8 for the modules called inside it (pytorch/
// quantization.py at d0067d0da6cb01811b8072a7d304f0e00344ce2b). The training
// step opens one around each layer's forward and backward, so the LM head and
// the embedding stay bf16, as in Megatron-LM (its output layer is not a TE module).
#pragma once

namespace gpuledger {

class Fp8GemmScope {
 public:
  explicit Fp8GemmScope(bool on);
  ~Fp8GemmScope();
  Fp8GemmScope(const Fp8GemmScope&) = delete;
  Fp8GemmScope& operator=(const Fp8GemmScope&) = delete;

 private:
  bool previous_;
};

bool fp8_gemms_on();

}  // namespace gpuledger
