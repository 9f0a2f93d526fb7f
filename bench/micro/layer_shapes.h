// The shapes one transformer layer (and the model's head) runs at, for a model
// preset at a tensor-parallel degree and a sequence length: the linear layers'
// GEMMs as models/transformer/layer.cpp issues them, the attention geometry,
// the norm and loss sizes. Per TP rank (Megatron's column/row split:
// heads, KV heads and the MLP inner size divided by tp, the vocabulary padded).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/device.h"

namespace gpuledger::micro {

// y (n × out) = x (n × in) · Wᵀ, W (out × in): one linear layer on n tokens.
struct LinearShape {
  std::string name;  // "qkv", "o", "gate", "up", "down", "lm_head"
  int64_t in = 0, out = 0;
};

enum class Pass { kForward, kDgrad, kWgrad };
const char* pass_name(Pass p);  // "fwd", "dgrad", "wgrad"

struct LayerShapes {
  std::string label;        // "llama3-70b:tp8"
  bool llama = true;        // RMSNorm + RoPE + SwiGLU (else LayerNorm + GELU)
  int64_t tokens = 0;       // n = B·T
  int64_t hidden = 0;       // h
  int64_t ffn_local = 0;    // f / tp
  int64_t vocab = 0;        // V (unpadded)
  int64_t vocab_local = 0;  // V' / tp
  float rope_theta = 10000.0f;
  AttnShape attn;  // B, a/t, k/t, T, d
  std::vector<LinearShape> linears;
};

// Throws (ConfigError) for an unknown preset.
LayerShapes layer_shapes(const std::string& preset, int64_t tp, int64_t seq, int64_t mbs);

// The GEMM a linear layer's pass issues (models/transformer/layer.cpp
// linear_forward, linear_backward_data, linear_backward_weight), operands
// unset: forward m = n, n = out, k = in with Bᵀ; dgrad m = n, n = in, k = out;
// wgrad Aᵀ, m = out, n = in, k = n, accumulating (beta 1) into the gradient.
GemmArgs linear_gemm(const LinearShape& l, int64_t tokens, Pass p, DType t);

// The materialized attention core's GEMMs (models/transformer/attention.cpp):
// per (sample, KV head) batched, the query heads of a group contiguous.
// Forward: S = Q·Kᵀ (fp32 out), ctx = P·V. Backward: dP = dctx·Vᵀ (fp32),
// dV = Pᵀ·dctx, dQ = dS·K, dK = dSᵀ·Q. Operands unset.
std::vector<GemmArgs> attention_forward_gemms(const AttnShape& s, DType t);
std::vector<GemmArgs> attention_backward_gemms(const AttnShape& s, DType t);

}  // namespace gpuledger::micro
