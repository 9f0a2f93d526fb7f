// The FLOPs each compute op executes — one definition shared by every backend
// (cpu, meta, cuda), so a meta run counts exactly what a real run executes.
// Only GEMM-class work is counted (multiply-add = 2 FLOPs); element-wise ops,
// norms and softmax are not (as every MFU convention does).
#pragma once
#include <cstdint>

#include "kernels/device.h"

namespace gpuledger {

inline int64_t gemm_flops(const GemmArgs& g) { return 2 * g.m * g.n * g.k * g.batch; }

// Flash forward: S = QKᵀ and O = P·V over the full T×T (masked blocks are not
// skipped; docs/exact-budget.md "FLOPs"): 2 · 2·B·Hq·T²·D.
inline int64_t flash_forward_flops(const AttnShape& s) {
  return 2 * (2 * s.B * s.Hq * s.T * s.T * s.D);
}
// Flash backward (Dao et al. 2022, Alg. 4): recompute S = QKᵀ, then dV = Pᵀ·dO,
// dP = dO·Vᵀ, dQ = dS·K, dK = dSᵀ·Q: 5 · 2·B·Hq·T²·D.
inline int64_t flash_backward_flops(const AttnShape& s) {
  return 5 * (2 * s.B * s.Hq * s.T * s.T * s.D);
}

}  // namespace gpuledger
