// CpuDevice vocabulary-parallel embedding and cross-entropy (device.h, the end
// of the op table): Megatron's VocabParallelEmbedding and
// vocab_parallel_cross_entropy (Shoeybi et al. 2019 §3). A TP rank holds a
// contiguous block of the padded vocabulary; the caller all-reduces the
// per-row partials (embedding output; max, target logit, sum of exponentials)
// over the TP group between the ops. exp in fp32, sums in double then fp32
// (the reduction across ranks is fp32, as the partials cross the wire).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_device.h"

namespace gpuledger {

namespace {
constexpr int64_t kParallelMinElems = 1 << 15;
}  // namespace

void CpuDevice::vocab_embedding_forward_impl(void* out, const int32_t* ids, const void* wte, DType t, int64_t N,
                                             int64_t C, int64_t row_begin, int64_t rows) {
  const int64_t eb = dtype_bytes(t);
#pragma omp parallel for if (N * C > kParallelMinElems)
  for (int64_t i = 0; i < N; ++i) {
    char* dst = static_cast<char*>(out) + i * C * eb;
    const int64_t r = static_cast<int64_t>(ids[i]) - row_begin;
    if (r >= 0 && r < rows)
      std::memcpy(dst, static_cast<const char*>(wte) + r * C * eb, static_cast<size_t>(C * eb));
    else
      std::memset(dst, 0, static_cast<size_t>(C * eb));  // 0 in every dtype
  }
}

void CpuDevice::vocab_embedding_backward_impl(void* dwte, DType grad_t, const void* dout, DType t, const int32_t* ids,
                                              int64_t N, int64_t C, int64_t row_begin, int64_t rows) {
  // Sequential over tokens (an id may repeat): each owned row accumulates in
  // token order, one rounding per token (the tiny test shapes make this cheap).
  const int64_t eb = dtype_bytes(t), gb = dtype_bytes(grad_t);
  std::vector<float> acc(static_cast<size_t>(C)), d(static_cast<size_t>(C));
  for (int64_t i = 0; i < N; ++i) {
    const int64_t r = static_cast<int64_t>(ids[i]) - row_begin;
    if (r < 0 || r >= rows) continue;
    char* row = static_cast<char*>(dwte) + r * C * gb;
    convert_to_fp32(row, grad_t, acc.data(), C);
    convert_to_fp32(static_cast<const char*>(dout) + i * C * eb, t, d.data(), C);
    for (int64_t c = 0; c < C; ++c) acc[c] += d[c];
    convert_from_fp32(acc.data(), row, grad_t, C);
  }
}

void CpuDevice::vocab_ce_stats_impl(float* row_max, float* target_logit, const float* logits, const int32_t* targets,
                                    int64_t N, int64_t Vl, int64_t col_begin, int64_t V) {
  const int64_t valid = std::max<int64_t>(0, std::min(Vl, V - col_begin));  // columns < V
#pragma omp parallel for if (N * Vl > kParallelMinElems)
  for (int64_t i = 0; i < N; ++i) {
    const float* x = logits + i * Vl;
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < valid; ++j) mx = std::max(mx, x[j]);
    row_max[i] = mx;
    const int64_t c = static_cast<int64_t>(targets[i]) - col_begin;
    target_logit[i] = (c >= 0 && c < valid) ? x[c] : 0.0f;
  }
}

void CpuDevice::vocab_ce_exp_impl(float* logits, float* sum_exp, const float* row_max, int64_t N, int64_t Vl,
                                  int64_t col_begin, int64_t V) {
  const int64_t valid = std::max<int64_t>(0, std::min(Vl, V - col_begin));
#pragma omp parallel for if (N * Vl > kParallelMinElems)
  for (int64_t i = 0; i < N; ++i) {
    float* x = logits + i * Vl;
    double s = 0.0;
    for (int64_t j = 0; j < valid; ++j) {
      x[j] = std::exp(x[j] - row_max[i]);
      s += x[j];
    }
    for (int64_t j = valid; j < Vl; ++j) x[j] = 0.0f;  // padding: never a probability
    sum_exp[i] = static_cast<float>(s);
  }
}

void CpuDevice::vocab_ce_normalize_impl(float* probs, const float* sum_exp, int64_t N, int64_t Vl) {
#pragma omp parallel for if (N * Vl > kParallelMinElems)
  for (int64_t i = 0; i < N; ++i) {
    const float inv = 1.0f / sum_exp[i];
    for (int64_t j = 0; j < Vl; ++j) probs[i * Vl + j] *= inv;
  }
}

void CpuDevice::vocab_ce_backward_impl(float* dlogits, const float* probs, const int32_t* targets, int64_t N,
                                       int64_t Vl, int64_t col_begin, float scale) {
#pragma omp parallel for if (N * Vl > kParallelMinElems)
  for (int64_t i = 0; i < N; ++i) {
    for (int64_t j = 0; j < Vl; ++j) dlogits[i * Vl + j] = probs[i * Vl + j] * scale;
    const int64_t c = static_cast<int64_t>(targets[i]) - col_begin;
    if (c >= 0 && c < Vl) dlogits[i * Vl + c] -= scale;
  }
}

}  // namespace gpuledger
