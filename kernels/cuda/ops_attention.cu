// CUDA ops of materialized attention: the head layout moves (split_qkv,
// merge_qkv_grad, merge_heads, split_heads: byte copies, no conversion) and the
// masked softmax with its backward (one block per score row), and attention
// sinks (with the softmax, or on the flash core's output and log-sum-exp). Semantics of the
// CPU reference, kernels/cpu/ops_attention.cpp: probabilities are
// exp(scale·(s − max))/Σ over the visible keys (attn_tiles.h), every other
// entry an exact 0 whose score is never read; dscores = p ⊙ (dp − Σ dp·p)·scale.
// The QKᵀ and P·V products are ordinary device GEMMs.
#include "kernels/cuda/attn_tiles.h"
#include "kernels/cuda/launch_config.h"
#include "kernels/cuda/simt_device.cuh"

namespace gpuledger {
inline namespace GPL_SIMT_NAMESPACE {
namespace {

using namespace simt;

int64_t window_of(const AttnShape& s) { return s.window ? *s.window : 0; }

// Element e of the per-head layout (B, H, T, D) <-> the fused layout
// (B, T, row_heads·D) at head columns col0 + h. U: the element's bits.
template <class U>
__global__ void move_heads_kernel(U* dst, const U* src, int64_t B, int64_t H, int64_t T, int64_t D, int64_t row_heads,
                                  int64_t col0, bool to_heads) {
  const int64_t n = B * H * T * D;
  for (int64_t e = global_thread(); e < n; e += grid_threads()) {
    const int64_t d = e % D, t = e / D % T, h = e / (D * T) % H, b = e / (D * T * H);
    const int64_t fused = (b * T + t) * row_heads * D + (col0 + h) * D + d;
    if (to_heads)
      dst[e] = src[fused];
    else
      dst[fused] = src[e];
  }
}

void move_heads(cudaStream_t stream, void* dst, const void* src, DType t, int64_t B, int64_t H, int64_t T, int64_t D,
                int64_t row_heads, int64_t col0, bool to_heads) {
  const auto l = cuda_launch::elementwise(B * H * T * D);
  if (dtype_bytes(t) == 2)
    launch_kernel(move_heads_kernel<uint16_t>, grid1d(l.blocks), dim3(l.threads), 0, stream,
                  static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), B, H, T, D, row_heads, col0,
                  to_heads);
  else
    launch_kernel(move_heads_kernel<uint32_t>, grid1d(l.blocks), dim3(l.threads), 0, stream,
                  static_cast<uint32_t*>(dst), static_cast<const uint32_t*>(src), B, H, T, D, row_heads, col0,
                  to_heads);
}

// One block per row r of the (B·Hq·T, T) scores; query i = r mod T.
template <class T>
__global__ void softmax_forward_kernel(T* probs, const float* scores, int64_t T_, int64_t window, float scale) {
  GPL_SHARED float scratch[32];
  const int64_t r = blockIdx.x, i = r % T_, j0 = attn::first_key(i, window);
  const float* sr = scores + r * T_;
  T* pr = probs + r * T_;
  float mx = -INFINITY;
  for (int64_t j = j0 + threadIdx.x; j <= i; j += blockDim.x) mx = fmaxf(mx, sr[j]);
  mx = block_reduce(mx, scratch, MaxOp{});
  float sum = 0.0f;
  for (int64_t j = j0 + threadIdx.x; j <= i; j += blockDim.x) sum += expf(scale * (sr[j] - mx));
  sum = block_reduce(sum, scratch, SumOp{});
  const float inv = 1.0f / sum;
  for (int64_t j = threadIdx.x; j < T_; j += blockDim.x)
    pr[j] = (j >= j0 && j <= i) ? from_float<T>(expf(scale * (sr[j] - mx)) * inv) : from_float<T>(0.0f);
}

template <class T>
__global__ void softmax_backward_kernel(float* dscores, const float* dprobs, const T* probs, int64_t T_, int64_t window,
                                        float scale) {
  GPL_SHARED float scratch[32];
  const int64_t r = blockIdx.x, i = r % T_, j0 = attn::first_key(i, window);
  const float* dp = dprobs + r * T_;
  const T* pr = probs + r * T_;
  float* ds = dscores + r * T_;
  float dot = 0.0f;
  for (int64_t j = j0 + threadIdx.x; j <= i; j += blockDim.x) dot += dp[j] * to_float(pr[j]);
  dot = block_reduce(dot, scratch, SumOp{});
  for (int64_t j = threadIdx.x; j < T_; j += blockDim.x)
    ds[j] = (j >= j0 && j <= i) ? to_float(pr[j]) * (dp[j] - dot) * scale : 0.0f;
}

// The softmax with sink h's logit (unscaled) in the denominator; lse, the
// row's log-denominator, for the sinks' backward (CPU reference:
// kernels/cpu/ops_attention.cpp softmax_sinks_forward_impl).
template <class T>
__global__ void softmax_sinks_forward_kernel(T* probs, float* lse, const float* scores, const T* sinks, int64_t H,
                                             int64_t T_, int64_t window, float scale) {
  GPL_SHARED float scratch[32];
  const int64_t r = blockIdx.x, i = r % T_, j0 = attn::first_key(i, window);
  const float sk = to_float(sinks[r / T_ % H]);
  const float* sr = scores + r * T_;
  T* pr = probs + r * T_;
  float mx = sk;
  for (int64_t j = j0 + threadIdx.x; j <= i; j += blockDim.x) mx = fmaxf(mx, scale * sr[j]);
  mx = block_reduce(mx, scratch, MaxOp{});
  float sum = 0.0f;
  for (int64_t j = j0 + threadIdx.x; j <= i; j += blockDim.x) sum += expf(scale * sr[j] - mx);
  sum = block_reduce(sum, scratch, SumOp{}) + expf(sk - mx);
  const float inv = 1.0f / sum;
  for (int64_t j = threadIdx.x; j < T_; j += blockDim.x)
    pr[j] = (j >= j0 && j <= i) ? from_float<T>(expf(scale * sr[j] - mx) * inv) : from_float<T>(0.0f);
  if (threadIdx.x == 0) lse[r] = mx + logf(sum);
}

// One thread per row of out (rows × D): scaled by exp(lse − lse'), lse' = logaddexp(lse, sink).
template <class T>
__global__ void attention_sinks_forward_kernel(T* out, float* lse, const T* sinks, int64_t rows, int64_t H, int64_t T_,
                                               int64_t D) {
  for (int64_t r = global_thread(); r < rows; r += grid_threads()) {
    const float sk = to_float(sinks[r / T_ % H]), l = lse[r];
    const float mx = fmaxf(l, sk);
    const float joined = mx + logf(expf(l - mx) + expf(sk - mx));
    const float w = expf(l - joined);
    for (int64_t d = 0; d < D; ++d) out[r * D + d] = from_float<T>(to_float(out[r * D + d]) * w);
    lse[r] = joined;
  }
}

// One block per head h: dsinks[h] −= Σ_{b,i} exp(sink_h − lse_i)·(dout_i · out_i).
template <class T, class G>
__global__ void attention_sinks_backward_kernel(G* dsinks, const T* dout, const T* out, const float* lse,
                                                const T* sinks, int64_t B, int64_t H, int64_t T_, int64_t D) {
  GPL_SHARED float scratch[32];
  const int64_t h = blockIdx.x;
  const float sk = to_float(sinks[h]);
  float acc = 0.0f;
  for (int64_t q = threadIdx.x; q < B * T_; q += blockDim.x) {
    const int64_t r = (q / T_ * H + h) * T_ + q % T_;
    float dot = 0.0f;
    for (int64_t d = 0; d < D; ++d) dot += to_float(dout[r * D + d]) * to_float(out[r * D + d]);
    acc += expf(sk - lse[r]) * dot;
  }
  acc = block_reduce(acc, scratch, SumOp{});
  if (threadIdx.x == 0) dsinks[h] = from_float<G>(to_float(dsinks[h]) - acc);
}

}  // namespace

// qkv row layout: [q heads 0..Hq−1 | k heads 0..Hkv−1 | v heads 0..Hkv−1], D each.
void SimtDevice::split_qkv_impl(void* q, void* k, void* v, const void* qkv, DType t, const AttnShape& s) {
  const int64_t row_heads = s.Hq + 2 * s.Hkv;
  move_heads(stream(), q, qkv, t, s.B, s.Hq, s.T, s.D, row_heads, 0, true);
  move_heads(stream(), k, qkv, t, s.B, s.Hkv, s.T, s.D, row_heads, s.Hq, true);
  move_heads(stream(), v, qkv, t, s.B, s.Hkv, s.T, s.D, row_heads, s.Hq + s.Hkv, true);
}

void SimtDevice::merge_qkv_grad_impl(void* dqkv, const void* dq, const void* dk, const void* dv, DType t,
                                     const AttnShape& s) {
  const int64_t row_heads = s.Hq + 2 * s.Hkv;
  move_heads(stream(), dqkv, dq, t, s.B, s.Hq, s.T, s.D, row_heads, 0, false);
  move_heads(stream(), dqkv, dk, t, s.B, s.Hkv, s.T, s.D, row_heads, s.Hq, false);
  move_heads(stream(), dqkv, dv, t, s.B, s.Hkv, s.T, s.D, row_heads, s.Hq + s.Hkv, false);
}

void SimtDevice::merge_heads_impl(void* out, const void* ctx, DType t, const AttnShape& s) {
  move_heads(stream(), out, ctx, t, s.B, s.Hq, s.T, s.D, s.Hq, 0, false);
}

void SimtDevice::split_heads_impl(void* ctx, const void* in, DType t, const AttnShape& s) {
  move_heads(stream(), ctx, in, t, s.B, s.Hq, s.T, s.D, s.Hq, 0, true);
}

void SimtDevice::softmax_forward_impl(void* probs, const float* scores, DType t, const AttnShape& s) {
  dispatch(t, [&](auto tag) {
    using E = decltype(tag);
    launch_kernel(softmax_forward_kernel<E>, grid1d(s.B * s.Hq * s.T), dim3(cuda_launch::row_threads(s.T)), 0, stream(),
                  static_cast<E*>(probs), scores, s.T, window_of(s), s.scale());
  });
}

void SimtDevice::softmax_backward_impl(float* dscores, const float* dprobs, const void* probs, DType t,
                                       const AttnShape& s) {
  dispatch(t, [&](auto tag) {
    using E = decltype(tag);
    launch_kernel(softmax_backward_kernel<E>, grid1d(s.B * s.Hq * s.T), dim3(cuda_launch::row_threads(s.T)), 0,
                  stream(), dscores, dprobs, static_cast<const E*>(probs), s.T, window_of(s), s.scale());
  });
}

void SimtDevice::softmax_sinks_forward_impl(void* probs, float* lse, const float* scores, const void* sinks, DType t,
                                            const AttnShape& s) {
  dispatch(t, [&](auto tag) {
    using E = decltype(tag);
    launch_kernel(softmax_sinks_forward_kernel<E>, grid1d(s.B * s.Hq * s.T), dim3(cuda_launch::row_threads(s.T)), 0,
                  stream(), static_cast<E*>(probs), lse, scores, static_cast<const E*>(sinks), s.Hq, s.T, window_of(s),
                  s.scale());
  });
}

void SimtDevice::attention_sinks_forward_impl(void* out, float* lse, const void* sinks, DType t, const AttnShape& s) {
  const int64_t rows = s.B * s.Hq * s.T;
  const auto l = cuda_launch::elementwise(rows);
  dispatch(t, [&](auto tag) {
    using E = decltype(tag);
    launch_kernel(attention_sinks_forward_kernel<E>, grid1d(l.blocks), dim3(l.threads), 0, stream(),
                  static_cast<E*>(out), lse, static_cast<const E*>(sinks), rows, s.Hq, s.T, s.D);
  });
}

void SimtDevice::attention_sinks_backward_impl(void* dsinks, DType grad_t, const void* dout, const void* out,
                                               const float* lse, const void* sinks, DType t, const AttnShape& s) {
  dispatch2(t, grad_t, [&](auto tag, auto gtag) {
    using E = decltype(tag);
    using G = decltype(gtag);
    launch_kernel(attention_sinks_backward_kernel<E, G>, grid1d(s.Hq), dim3(cuda_launch::row_threads(s.B * s.T)), 0,
                  stream(), static_cast<G*>(dsinks), static_cast<const E*>(dout), static_cast<const E*>(out), lse,
                  static_cast<const E*>(sinks), s.B, s.Hq, s.T, s.D);
  });
}

}  // namespace GPL_SIMT_NAMESPACE
}  // namespace gpuledger
