// CpuDevice optimizer ops: AdamW and the Σx² used for gradient-norm clipping.
//
// AdamW (Loshchilov & Hutter 2019, Alg. 2, with Adam's bias correction,
// Kingma & Ba 2015, Alg. 1), per element, in fp32:
//   g = grad · grad_scale                       (clipping scale applied first)
//   m = β1·m + (1 − β1)·g,   v = β2·v + (1 − β2)·g²
//   m̂ = m / (1 − β1^step),   v̂ = v / (1 − β2^step)
//   p = p − lr·(m̂ / (√v̂ + ε) + wd·p)          (decoupled decay lr·wd·p)
// p is the fp32 master copy, and the 16-bit weights receive round(p); with no
// master the weights are fp32 and are p. The bias corrections arrive formed
// (Device::adamw: AdamwStep, kernels/op_checks.cpp).
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_device.h"

namespace gpuledger {

namespace {

constexpr int64_t kChunk = 1024;
constexpr int64_t kParallelMinElems = 1 << 15;
// sum_squares partial sums: fixed blocks, summed in block order, so the result
// does not depend on the number of threads.
constexpr int64_t kSumBlock = 1 << 16;

const char* at(const void* p, DType t, int64_t i) { return static_cast<const char*>(p) + i * dtype_bytes(t); }

}  // namespace

void CpuDevice::adamw_impl(float* master, void* weights, DType w_t, const void* grads, DType grad_t, float* m, float* v,
                           int64_t n, const AdamwStep& update) {
  float* param = master ? master : static_cast<float*>(weights);
  // Weights to refresh from the master: only when both exist.
  void* rounded = master ? weights : nullptr;
  const float lr = update.lr, beta1 = update.beta1, beta2 = update.beta2, eps = update.eps;
  const float weight_decay = update.weight_decay, grad_scale = update.grad_scale;
  const float bc1 = update.bias_correction1, bc2 = update.bias_correction2;
  const int64_t chunks = (n + kChunk - 1) / kChunk;

#pragma omp parallel for if (n > kParallelMinElems)
  for (int64_t ch = 0; ch < chunks; ++ch) {
    const int64_t i0 = ch * kChunk, len = std::min(kChunk, n - i0);
    float g[kChunk];
    convert_to_fp32(at(grads, grad_t, i0), grad_t, g, len);
    float* p = param + i0;
    float* mm = m + i0;
    float* vv = v + i0;
    for (int64_t i = 0; i < len; ++i) {
      const float gi = g[i] * grad_scale;
      mm[i] = beta1 * mm[i] + (1.0f - beta1) * gi;
      vv[i] = beta2 * vv[i] + (1.0f - beta2) * gi * gi;
      const float mhat = mm[i] / bc1, vhat = vv[i] / bc2;
      p[i] -= lr * (mhat / (std::sqrt(vhat) + eps) + weight_decay * p[i]);
    }
    if (rounded) convert_from_fp32(p, static_cast<char*>(rounded) + i0 * dtype_bytes(w_t), w_t, len);
  }
}

double CpuDevice::sum_squares_impl(const void* x, DType t, int64_t n) {
  if (n <= 0) return 0.0;
  const int64_t blocks = (n + kSumBlock - 1) / kSumBlock;
  std::vector<double> partial(static_cast<size_t>(blocks), 0.0);
#pragma omp parallel for if (n > kParallelMinElems)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t b0 = b * kSumBlock, bend = std::min(n, b0 + kSumBlock);
    double s = 0.0;
    float buf[kChunk];
    for (int64_t i0 = b0; i0 < bend; i0 += kChunk) {
      const int64_t len = std::min(kChunk, bend - i0);
      convert_to_fp32(at(x, t, i0), t, buf, len);
      for (int64_t i = 0; i < len; ++i) s += static_cast<double>(buf[i]) * buf[i];
    }
    partial[b] = s;
  }
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

}  // namespace gpuledger
