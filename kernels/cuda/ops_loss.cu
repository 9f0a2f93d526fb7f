// CUDA cross-entropy over rows of fp32 logits (N, Vp): columns V..Vp−1 are
// vocabulary padding, outside the softmax (docs/exact-budget.md). One block
// per row (launch_config.h, row_threads): the row max and Σ exp(x − max) by
// block reductions, then loss = max + log Σ − x_target (formed in double, as
// the CPU reference, kernels/cpu/ops_loss.cpp). Backward writes
// (softmax − onehot)·scale, padding 0, and may run in place (dlogits ==
// logits): every thread reads the row for both reductions before any writes.
// Device::cross_entropy_* check the targets on the host first (one small copy
// per call, kernels/op_checks.h), so no kernel reads out of bounds.
#include "kernels/cuda/launch_config.h"
#include "kernels/cuda/simt_device.cuh"

namespace gpuledger {
inline namespace GPL_SIMT_NAMESPACE {
namespace {

using namespace simt;

struct RowStats {
  float max;
  float sum;  // Σ_j<V exp(x_j − max)
};

// Every thread of the block gets the row's statistics.
GPL_DEVICE RowStats row_stats(const float* x, int64_t V, float* scratch) {
  const int64_t tid = threadIdx.x, nt = blockDim.x;
  float mx = -INFINITY;
  for (int64_t j = tid; j < V; j += nt) mx = fmaxf(mx, x[j]);
  mx = block_reduce(mx, scratch, MaxOp{});
  float s = 0.0f;
  for (int64_t j = tid; j < V; j += nt) s += expf(x[j] - mx);
  s = block_reduce(s, scratch, SumOp{});
  return {mx, s};
}

__global__ void cross_entropy_forward_kernel(float* losses, const float* logits, const int32_t* targets, int64_t Vp,
                                             int64_t V) {
  GPL_SHARED float scratch[32];
  const int64_t r = blockIdx.x;
  const float* x = logits + r * Vp;
  const RowStats st = row_stats(x, V, scratch);
  if (threadIdx.x == 0)
    losses[r] = static_cast<float>(static_cast<double>(st.max) + log(static_cast<double>(st.sum)) -
                                   static_cast<double>(x[targets[r]]));
}

__global__ void cross_entropy_backward_kernel(float* dlogits, const float* logits, const int32_t* targets, int64_t Vp,
                                              int64_t V, float scale) {
  GPL_SHARED float scratch[32];
  const int64_t r = blockIdx.x;
  const float* x = logits + r * Vp;
  float* d = dlogits + r * Vp;
  const RowStats st = row_stats(x, V, scratch);  // ends with a barrier: the row is read
  const float inv = static_cast<float>(1.0 / static_cast<double>(st.sum));
  const int32_t tgt = targets[r];
  for (int64_t j = threadIdx.x; j < Vp; j += blockDim.x) {
    if (j < V) {
      const float p = expf(x[j] - st.max) * inv;
      d[j] = (p - (j == tgt ? 1.0f : 0.0f)) * scale;
    } else {
      d[j] = 0.0f;
    }
  }
}

}  // namespace

void SimtDevice::cross_entropy_forward_impl(float* losses, const float* logits, const int32_t* targets, int64_t N,
                                            int64_t Vp, int64_t V) {
  launch_kernel(cross_entropy_forward_kernel, grid1d(N), dim3(cuda_launch::row_threads(V)), 0, stream(), losses, logits,
                targets, Vp, V);
}

void SimtDevice::cross_entropy_backward_impl(float* dlogits, const float* logits, const int32_t* targets, int64_t N,
                                             int64_t Vp, int64_t V, float scale) {
  launch_kernel(cross_entropy_backward_kernel, grid1d(N), dim3(cuda_launch::row_threads(V)), 0, stream(), dlogits,
                logits, targets, Vp, V, scale);
}

}  // namespace GPL_SIMT_NAMESPACE
}  // namespace gpuledger
