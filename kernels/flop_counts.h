// The FLOPs each compute op executes — one definition shared by every backend
// (cpu, meta, cuda), so a meta run counts exactly what a real run executes.
// Only GEMM-class work is counted (multiply-add = 2 FLOPs); element-wise ops,
// norms and softmax are not (as every MFU convention does).
#pragma once
#include <cstdint>

#include "kernels/device.h"

namespace gpuledger {

inline int64_t gemm_flops(const GemmArgs& g) { return 2 * g.m * g.n * g.k * g.batch; }

// Flash forward of a block of T queries and Tk keys (Tk 0: T): S = QKᵀ and
// O = P·V over the full T×Tk (masked blocks are not skipped; docs/exact-budget.md
// "FLOPs"): 2 · 2·B·Hq·T·Tk·D. A ring of cp blocks of s/cp keys thus counts
// what the single-rank s×s attention counts for the rank's queries.
inline int64_t flash_forward_flops(const AttnShape& s, int64_t Tk = 0) {
  return 2 * (2 * s.B * s.Hq * s.T * (Tk > 0 ? Tk : s.T) * s.D);
}
// Flash backward (Dao et al. 2022, Alg. 4): recompute S = QKᵀ, then dV = Pᵀ·dO,
// dP = dO·Vᵀ, dQ = dS·K, dK = dSᵀ·Q: 5 · 2·B·Hq·T·Tk·D.
inline int64_t flash_backward_flops(const AttnShape& s, int64_t Tk = 0) {
  return 5 * (2 * s.B * s.Hq * s.T * (Tk > 0 ? Tk : s.T) * s.D);
}

// Cached attention (decode, or a prefill chunk, against the KV cache): per
// sequence and query head, S = q·Kᵀ over n_q new queries × n_kv keys held, and
// O = P·V: 2 · 2·Hq·n_q·n_kv·D. n_kv is what the sequence keeps,
// min(len, window). For decode (n_q = 1) every key is visible and the count is
// exact; for a chunk of n_q > 1 the masked part of the rectangle is counted
// too, the convention of flash_forward_flops (a prefill of T tokens into an
// empty cache counts the same 2·2·T²·D per head as flash).
inline int64_t cached_attention_flops(int64_t Hq, int64_t D, int64_t n_q, int64_t n_kv) {
  return 2 * (2 * Hq * n_q * n_kv * D);
}
inline int64_t cached_attention_flops(int64_t Hq, const KvCacheView& c) {
  int64_t f = 0;
  for (const auto& s : c.seqs) f += cached_attention_flops(Hq, c.D, s.n_new, c.slots_held(s));
  return f;
}

// The optimizer update's FLOPs per parameter element, counted from the
// arithmetic of kernels/optimizer_rules.h as written: every add, subtract,
// multiply, divide, square root and sign once; the per-step constants
// (1 − β, 1 − lr·wd, the bias corrections) are formed once per call, not per
// element, and the gradient's clipping scale g·c counts 1. Element-wise, so
// Device::executed_flops() leaves them out (as MFU conventions do); the
// optimizer microbenchmark reports FLOP/s from them.
//   AdamW   17: g·c 1; m = β1·m + (1−β1)·g 3; v = β2·v + (1−β2)·g·g 4;
//               m/bc1, v/bc2 2; √, +ε, ÷, wd·p, +, lr·, p − 7
//   SGD      7: g·c 1; g + wd·p 2; b = μ·b + g 2; p − lr·b 2  (5 without momentum: no μ·b + g)
//   Adagrad 10: g·c 1; g + wd·p 2; s + g·g 2; √, +ε, ÷, lr·, p − 5
//   Lion    11: g·c 1; c = β1·m + (1−β1)·g 3; sign 1; m = β2·m + (1−β2)·g 3;
//               p·(1−lr·wd), lr·sign, − 3
inline int64_t optimizer_flops_per_elem(const OptimizerHyper& h) {
  switch (h.kind) {
    case OptimizerKind::kAdamW: return 17;
    case OptimizerKind::kSGD: return h.momentum != 0.0f ? 7 : 5;
    case OptimizerKind::kAdagrad: return 10;
    case OptimizerKind::kLion: return 11;
  }
  return 0;
}

}  // namespace gpuledger
