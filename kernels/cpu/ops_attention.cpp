// CPU reference ops of materialized attention: the head layout moves
// (split_qkv, merge_qkv_grad, merge_heads, split_heads), the masked softmax
// with its backward, and attention sinks (with the softmax, or on the flash
// core's output and log-sum-exp). The QKᵀ and P·V products are plain device GEMMs (ops_gemm.cpp).
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

namespace {

// The masked softmax's frame, shared by the two forwards: for each score row r
// (query i = r mod T, visible keys first_key(i) ≤ j ≤ i) `exps(r, i, j0, sr,
// row)` writes exp(…) of the visible entries into row and returns their
// denominator; the row is then normalized and stored in t, every other entry an
// exact 0 (its score is never read, so whatever the GEMM left there cannot leak in).
template <class Exps>
void softmax_rows(void* probs, const float* scores, DType t, const AttnShape& s, Exps exps) {
  const int64_t T = s.T, rows = s.B * s.Hq * T, eb = dtype_bytes(t);
#pragma omp parallel if (rows * T > kParallelMinElems)
  {
    std::vector<float> row(static_cast<size_t>(T));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = r % T, j0 = first_key(s, i);
      std::fill(row.begin(), row.end(), 0.0f);
      const float inv = 1.0f / exps(r, i, j0, scores + r * T, row.data());
      for (int64_t j = j0; j <= i; ++j) row[j] *= inv;
      convert_from_fp32(row.data(), at(probs, eb, r * T), t, T);
    }
  }
}

}  // namespace

// probs[i, j] = exp(scale·(s_ij − max_j s_ij)) / Σ_j … over the visible keys.
void CpuDevice::softmax_forward_impl(void* probs, const float* scores, DType t, const AttnShape& s) {
  const float scale = s.scale();
  softmax_rows(probs, scores, t, s, [&](int64_t, int64_t i, int64_t j0, const float* sr, float* row) {
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t j = j0; j <= i; ++j) mx = std::max(mx, sr[j]);
    float sum = 0.0f;
    for (int64_t j = j0; j <= i; ++j) {
      row[j] = std::exp(scale * (sr[j] - mx));
      sum += row[j];
    }
    return sum;
  });
}

// The softmax above with one more entry in the denominator, sink h's logit
// (unscaled: gpt-oss concatenates it to the already scaled scores), and the
// row's log-denominator lse = m + log(Σ_j exp(x_ij − m) + exp(sink − m)),
// m = max(max_j x_ij, sink), x = scale·s.
void CpuDevice::softmax_sinks_forward_impl(void* probs, float* lse, const float* scores, const void* sinks, DType t,
                                           const AttnShape& s) {
  const float scale = s.scale();
  std::vector<float> sink(static_cast<size_t>(s.Hq));
  convert_to_fp32(sinks, t, sink.data(), s.Hq);
  softmax_rows(probs, scores, t, s, [&](int64_t r, int64_t i, int64_t j0, const float* sr, float* row) {
    const float sk = sink[static_cast<size_t>(r / s.T % s.Hq)];
    float mx = sk;
    for (int64_t j = j0; j <= i; ++j) mx = std::max(mx, scale * sr[j]);
    float sum = std::exp(sk - mx);
    for (int64_t j = j0; j <= i; ++j) {
      row[j] = std::exp(scale * sr[j] - mx);
      sum += row[j];
    }
    lse[r] = mx + std::log(sum);
    return sum;
  });
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

// out (B, Hq, T, D) rows scaled by exp(lse − lse'), lse' = logaddexp(lse, sink):
// a row that saw no key (lse −inf, out 0) keeps out 0 and gets lse' = sink.
void CpuDevice::attention_sinks_forward_impl(void* out, float* lse, const void* sinks, DType t, const AttnShape& s) {
  const int64_t rows = s.B * s.Hq * s.T, D = s.D, eb = dtype_bytes(t);
  std::vector<float> sink(static_cast<size_t>(s.Hq));
  convert_to_fp32(sinks, t, sink.data(), s.Hq);
#pragma omp parallel if (rows * D > kParallelMinElems)
  {
    std::vector<float> row(static_cast<size_t>(D));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const float sk = sink[static_cast<size_t>(r / s.T % s.Hq)], l = lse[r];
      const float mx = std::max(l, sk);
      const float joined = mx + std::log(std::exp(l - mx) + std::exp(sk - mx));
      const float w = std::exp(l - joined);
      convert_to_fp32(at(out, eb, r * D), t, row.data(), D);
      for (float& x : row) x *= w;
      convert_from_fp32(row.data(), at(out, eb, r * D), t, D);
      lse[r] = joined;
    }
  }
}

// dsinks[h] += −Σ_{b,i} exp(sink_h − lse_i)·(dout_i · out_i), summed in double
// per head, then added to the gradient in grad_t.
void CpuDevice::attention_sinks_backward_impl(void* dsinks, DType grad_t, const void* dout, const void* out,
                                              const float* lse, const void* sinks, DType t, const AttnShape& s) {
  const int64_t H = s.Hq, T = s.T, D = s.D, eb = dtype_bytes(t);
  std::vector<float> sink(static_cast<size_t>(H)), grad(static_cast<size_t>(H));
  convert_to_fp32(sinks, t, sink.data(), H);
  convert_to_fp32(dsinks, grad_t, grad.data(), H);
#pragma omp parallel if (s.B * H * T * D > kParallelMinElems)
  {
    std::vector<float> o(static_cast<size_t>(D)), g(static_cast<size_t>(D));
#pragma omp for schedule(static)
    for (int64_t h = 0; h < H; ++h) {
      double acc = 0;
      for (int64_t b = 0; b < s.B; ++b)
        for (int64_t i = 0; i < T; ++i) {
          const int64_t r = (b * H + h) * T + i;
          convert_to_fp32(at(out, eb, r * D), t, o.data(), D);
          convert_to_fp32(at(dout, eb, r * D), t, g.data(), D);
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += static_cast<double>(g[d]) * o[d];
          acc += std::exp(static_cast<double>(sink[h]) - lse[r]) * dot;
        }
      grad[h] = static_cast<float>(grad[h] - acc);
    }
  }
  convert_from_fp32(grad.data(), dsinks, grad_t, H);
}

}  // namespace gpuledger
