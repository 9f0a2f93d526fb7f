// CpuDevice optimizer ops: the update of each optimizer (AdamW, SGD, Adagrad,
// Lion; the per-element rules and their sources are kernels/optimizer_rules.h)
// and the Σx² used for gradient-norm clipping.
//
// Per element, in fp32: g = grad · grad_scale (clipping scale applied first),
// then the rule updates p and its states. p is the fp32 master copy, and the
// 16-bit weights receive round(p); with no master the weights are fp32 and
// are p. AdamW's bias corrections arrive formed (Device::optimizer_update:
// OptimizerStep, kernels/op_checks.cpp).
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_device.h"
#include "kernels/optimizer_rules.h"

namespace gpuledger {

namespace {

constexpr int64_t kChunk = 1024;
constexpr int64_t kParallelMinElems = 1 << 15;
// sum_squares partial sums: fixed blocks, summed in block order, so the result
// does not depend on the number of threads.
constexpr int64_t kSumBlock = 1 << 16;

const char* at(const void* p, DType t, int64_t i) { return static_cast<const char*>(p) + i * dtype_bytes(t); }

}  // namespace

void CpuDevice::optimizer_update_impl(float* master, void* weights, DType w_t, const void* grads, DType grad_t,
                                      float* state1, float* state2, int64_t n, const OptimizerStep& update) {
  float* param = master ? master : static_cast<float*>(weights);
  // Weights to refresh from the master: only when both exist.
  void* rounded = master ? weights : nullptr;
  const float grad_scale = update.grad_scale;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  dispatch_optimizer(update.hyper.kind, [&]<OptimizerKind K>() {
#pragma omp parallel for if (n > kParallelMinElems)
    for (int64_t ch = 0; ch < chunks; ++ch) {
      const int64_t i0 = ch * kChunk, len = std::min(kChunk, n - i0);
      float g[kChunk];
      convert_to_fp32(at(grads, grad_t, i0), grad_t, g, len);
      float* p = param + i0;
      float* s1 = state1 ? state1 + i0 : nullptr;
      float* s2 = state2 ? state2 + i0 : nullptr;
      for (int64_t i = 0; i < len; ++i)
        p[i] = optimizer_element<K>(update, p[i], g[i] * grad_scale, s1 ? s1 + i : nullptr, s2 ? s2 + i : nullptr);
      if (rounded) convert_from_fp32(p, static_cast<char*>(rounded) + i0 * dtype_bytes(w_t), w_t, len);
    }
  });
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
