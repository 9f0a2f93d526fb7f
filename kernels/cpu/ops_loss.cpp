// CpuDevice cross-entropy over rows of fp32 logits (N, Vp), of which only the
// first V columns are the vocabulary: columns V..Vp−1 are padding (Megatron's
// padded vocabulary, docs/exact-budget.md) and take no part in the softmax.
// loss = log Σ_j exp(x_j) − x_target, computed stably as
// max + log Σ_j exp(x_j − max), exp in fp32 and the sum in double.
// Backward: dlogits = (softmax − onehot(target))·scale, padding columns 0; it
// may be computed in place (dlogits == logits).
#include <algorithm>
#include <cmath>

#include "kernels/cpu/cpu_device.h"

namespace gpuledger {

namespace {

constexpr int64_t kParallelMinElems = 1 << 15;

struct RowStats {
  float max;
  double sum;  // Σ_j<V exp(x_j − max)
};

RowStats row_stats(const float* x, int64_t V) {
  const float mx = *std::max_element(x, x + V);
  double s = 0.0;
  for (int64_t j = 0; j < V; ++j) s += std::exp(x[j] - mx);  // fp32 exp (1 ulp), double sum
  return {mx, s};
}

}  // namespace

void CpuDevice::cross_entropy_forward_impl(float* losses, const float* logits, const int32_t* targets, int64_t N,
                                           int64_t Vp, int64_t V) {
#pragma omp parallel for if (N * V > kParallelMinElems)
  for (int64_t i = 0; i < N; ++i) {
    const float* x = logits + i * Vp;
    const RowStats st = row_stats(x, V);
    losses[i] = static_cast<float>(st.max + std::log(st.sum) - x[targets[i]]);
  }
}

void CpuDevice::cross_entropy_backward_impl(float* dlogits, const float* logits, const int32_t* targets, int64_t N,
                                            int64_t Vp, int64_t V, float scale) {
#pragma omp parallel for if (N * V > kParallelMinElems)
  for (int64_t i = 0; i < N; ++i) {
    const float* x = logits + i * Vp;
    float* d = dlogits + i * Vp;
    const RowStats st = row_stats(x, V);  // read every logit before any is overwritten
    const float inv = static_cast<float>(1.0 / st.sum);
    const int32_t tgt = targets[i];
    for (int64_t j = 0; j < V; ++j) {
      const float p = std::exp(x[j] - st.max) * inv;
      d[j] = (p - (j == tgt ? 1.0f : 0.0f)) * scale;
    }
    std::fill(d + V, d + Vp, 0.0f);
  }
}

}  // namespace gpuledger
