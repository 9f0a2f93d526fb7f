// The GEMMs of a linear layer y = x·Wᵀ, W (out × in), x (n × in), row-major:
// the forward and the two backward products. Holds no layer and no state; the
// transformer layer (models/transformer/) and the MoE experts (models/moe/)
// both call these, so they live below both.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "kernels/device.h"

namespace gpuledger {

// y (n × out) = x·Wᵀ, y in t (beta = 0).
void linear_forward(Device& dev, void* y, const void* x, const void* w, DType t, int64_t n, int64_t in, int64_t out);
// dx (n × in) = beta·dx + dy·W.
void linear_backward_data(Device& dev, void* dx, const void* dy, const void* w, DType t, int64_t n, int64_t in,
                          int64_t out, float beta = 0.0f);
// dW (out × in, dtype gt) += dyᵀ·x. A gradient dtype that is neither fp32 nor t
// (fp16 weights, bf16 gradients) goes through an fp32 workspace product.
void linear_backward_weight(Device& dev, void* dw, DType gt, const void* dy, const void* x, DType t, int64_t n,
                            int64_t in, int64_t out);

}  // namespace gpuledger
