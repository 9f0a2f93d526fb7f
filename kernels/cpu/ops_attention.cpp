// CPU reference ops of materialized attention: the head layout moves
// (split_qkv, merge_qkv_grad, merge_heads, split_heads) and the masked softmax
// with its backward. The QKᵀ and P·V products are plain device GEMMs (ops_gemm.cpp).
// Layout moves are byte copies (no dtype conversion); the softmax computes in
// fp32 and stores the probabilities in the compute dtype.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_device.h"

namespace gpuledger {
namespace {

// Below this many elements a loop stays on one thread: the OpenMP fork/join
// (microseconds, far more on a loaded machine) costs more than the loop.
constexpr int64_t kParallelMinElems = int64_t{1} << 15;

// The keys query row i may see: [first, i] (causal; sliding window: i − window < j).
inline int64_t first_key(const AttnShape& s, int64_t i) {
  return s.window ? std::max<int64_t>(0, i - *s.window + 1) : 0;
}

inline char* at(void* p, int64_t elem_bytes, int64_t i) { return static_cast<char*>(p) + i * elem_bytes; }
inline const char* at(const void* p, int64_t elem_bytes, int64_t i) {
  return static_cast<const char*>(p) + i * elem_bytes;
}

// Copies rows of D elements between the fused (B, T, row_heads·D) layout, at head
// columns col0 … col0 + H − 1, and the per-head (B, H, T, D) layout.
// to_heads: src fused, dst per-head; otherwise src per-head, dst fused.
void move_heads(void* dst, const void* src, int64_t elem_bytes, int64_t B, int64_t H, int64_t T, int64_t D,
                int64_t row_heads, int64_t col0, bool to_heads) {
  const int64_t row_bytes = D * elem_bytes;
#pragma omp parallel for collapse(2) schedule(static) if (B * H * T * D > kParallelMinElems)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t) {
        const int64_t head_i = ((b * H + h) * T + t) * D;
        const int64_t fused_i = (b * T + t) * row_heads * D + (col0 + h) * D;
        std::memcpy(at(dst, elem_bytes, to_heads ? head_i : fused_i), at(src, elem_bytes, to_heads ? fused_i : head_i),
                    row_bytes);
      }
}

}  // namespace

// qkv row layout: [q heads 0..Hq−1 | k heads 0..Hkv−1 | v heads 0..Hkv−1], D each.
void CpuDevice::split_qkv_impl(void* q, void* k, void* v, const void* qkv, DType t, const AttnShape& s) {
  const int64_t eb = dtype_bytes(t), row_heads = s.Hq + 2 * s.Hkv;
  move_heads(q, qkv, eb, s.B, s.Hq, s.T, s.D, row_heads, 0, true);
  move_heads(k, qkv, eb, s.B, s.Hkv, s.T, s.D, row_heads, s.Hq, true);
  move_heads(v, qkv, eb, s.B, s.Hkv, s.T, s.D, row_heads, s.Hq + s.Hkv, true);
}

void CpuDevice::merge_qkv_grad_impl(void* dqkv, const void* dq, const void* dk, const void* dv, DType t,
                                    const AttnShape& s) {
  const int64_t eb = dtype_bytes(t), row_heads = s.Hq + 2 * s.Hkv;
  move_heads(dqkv, dq, eb, s.B, s.Hq, s.T, s.D, row_heads, 0, false);
  move_heads(dqkv, dk, eb, s.B, s.Hkv, s.T, s.D, row_heads, s.Hq, false);
  move_heads(dqkv, dv, eb, s.B, s.Hkv, s.T, s.D, row_heads, s.Hq + s.Hkv, false);
}

void CpuDevice::merge_heads_impl(void* out, const void* ctx, DType t, const AttnShape& s) {
  move_heads(out, ctx, dtype_bytes(t), s.B, s.Hq, s.T, s.D, s.Hq, 0, false);
}

void CpuDevice::split_heads_impl(void* ctx, const void* in, DType t, const AttnShape& s) {
  move_heads(ctx, in, dtype_bytes(t), s.B, s.Hq, s.T, s.D, s.Hq, 0, true);
}

// probs[i, j] = exp(scale·(s_ij − max_j s_ij)) / Σ_j … over the visible keys
// first_key(i) ≤ j ≤ i; every other entry is written as an exact 0 (and its
// score is never read, so whatever the GEMM left there cannot leak in).
void CpuDevice::softmax_forward_impl(void* probs, const float* scores, DType t, const AttnShape& s) {
  const int64_t T = s.T, rows = s.B * s.Hq * T, eb = dtype_bytes(t);
  const float scale = s.scale();
#pragma omp parallel if (rows * T > kParallelMinElems)
  {
    std::vector<float> row(static_cast<size_t>(T));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = r % T, j0 = first_key(s, i);
      const float* sr = scores + r * T;
      std::fill(row.begin(), row.end(), 0.0f);
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t j = j0; j <= i; ++j) mx = std::max(mx, sr[j]);
      float sum = 0.0f;
      for (int64_t j = j0; j <= i; ++j) {
        row[j] = std::exp(scale * (sr[j] - mx));
        sum += row[j];
      }
      const float inv = 1.0f / sum;
      for (int64_t j = j0; j <= i; ++j) row[j] *= inv;
      convert_from_fp32(row.data(), at(probs, eb, r * T), t, T);
    }
  }
}

// dscores = probs ⊙ (dprobs − Σ_j dprobs·probs) · scale (the softmax Jacobian
// times the chain rule through scale·scores); masked entries exactly 0.
void CpuDevice::softmax_backward_impl(float* dscores, const float* dprobs, const void* probs, DType t,
                                      const AttnShape& s) {
  const int64_t T = s.T, rows = s.B * s.Hq * T, eb = dtype_bytes(t);
  const float scale = s.scale();
#pragma omp parallel if (rows * T > kParallelMinElems)
  {
    std::vector<float> p(static_cast<size_t>(T));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = r % T, j0 = first_key(s, i);
      convert_to_fp32(at(probs, eb, r * T), t, p.data(), T);
      const float* dp = dprobs + r * T;
      float* ds = dscores + r * T;
      float dot = 0.0f;
      for (int64_t j = j0; j <= i; ++j) dot += dp[j] * p[j];
      for (int64_t j = 0; j < T; ++j) ds[j] = (j >= j0 && j <= i) ? p[j] * (dp[j] - dot) * scale : 0.0f;
    }
  }
}

}  // namespace gpuledger
