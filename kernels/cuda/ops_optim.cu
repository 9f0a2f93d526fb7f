// CUDA optimizer ops: AdamW (Loshchilov & Hutter 2019, Alg. 2, with Adam's bias
// correction, Kingma & Ba 2015, Alg. 1) and Σx² for gradient-norm clipping.
// AdamW runs the CPU reference's fp32 update element by element
// (kernels/cpu/ops_optim.cpp):
//   g = grad·grad_scale; m = β1·m + (1 − β1)·g; v = β2·v + (1 − β2)·g²
//   p −= lr·(m/(1 − β1^step) / (√(v/(1 − β2^step)) + ε) + wd·p)
// with the bias corrections Device::adamw formed in double on the host (AdamwStep).
// Σx² accumulates in double in a fixed grid (launch_config.h, reduce_blocks)
// and adds the block partials in order: the same result on every run.
#include <cmath>

#include "kernels/cuda/launch_config.h"
#include "kernels/cuda/simt_device.cuh"

namespace gpuledger {
inline namespace GPL_SIMT_NAMESPACE {
namespace {

using namespace simt;

// param: the fp32 master (or the fp32 weights); rounded: the 16-bit weights to
// refresh from it, or null.
template <class W, class G>
__global__ void adamw_kernel(float* param, W* rounded, const G* grads, float* m, float* v, int64_t n, float lr,
                             float beta1, float beta2, float eps, float weight_decay, float bc1, float bc2,
                             float grad_scale) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const float g = to_float(grads[i]) * grad_scale;
    const float mi = beta1 * m[i] + (1.0f - beta1) * g;
    const float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const float mhat = mi / bc1, vhat = vi / bc2;
    float p = param[i];
    p -= lr * (mhat / (sqrtf(vhat) + eps) + weight_decay * p);
    param[i] = p;
    if (rounded) rounded[i] = from_float<W>(p);
  }
}

template <class T>
__global__ void sum_squares_partial_kernel(double* partial, const T* x, int64_t n) {
  GPL_SHARED double scratch[32];
  double s = 0.0;
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const double xi = to_float(x[i]);
    s += xi * xi;
  }
  s = block_reduce(s, scratch, SumOp{});
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void sum_partials_kernel(double* out, const double* partial, int64_t blocks) {
  if (threadIdx.x != 0) return;
  double s = 0.0;
  for (int64_t b = 0; b < blocks; ++b) s += partial[b];
  *out = s;
}

}  // namespace

void SimtDevice::adamw_impl(float* master, void* weights, DType w_t, const void* grads, DType grad_t, float* m,
                            float* v, int64_t n, const AdamwStep& update) {
  float* param = master ? master : static_cast<float*>(weights);
  void* rounded = master ? weights : nullptr;
  const auto l = cuda_launch::elementwise(n);
  dispatch2(w_t, grad_t, [&](auto wt, auto gt) {
    using W = decltype(wt);
    using G = decltype(gt);
    launch_kernel(adamw_kernel<W, G>, grid1d(l.blocks), dim3(l.threads), 0, stream(), param, static_cast<W*>(rounded),
                  static_cast<const G*>(grads), m, v, n, update.lr, update.beta1, update.beta2, update.eps,
                  update.weight_decay, update.bias_correction1, update.bias_correction2, update.grad_scale);
  });
}

double SimtDevice::sum_squares_impl(const void* x, DType t, int64_t n) {
  if (n <= 0) return 0.0;
  const int64_t blocks = cuda_launch::reduce_blocks(n);
  Buffer partial = alloc((blocks + 1) * 8, Account::kWorkspace, "sum_squares.partial");
  double* out = partial.as<double>() + blocks;
  dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    launch_kernel(sum_squares_partial_kernel<T>, grid1d(blocks), dim3(cuda_launch::kReduceThreads), 0, stream(),
                  partial.as<double>(), static_cast<const T*>(x), n);
  });
  launch_kernel(sum_partials_kernel, dim3(1), dim3(32), 0, stream(), out,
                static_cast<const double*>(partial.as<double>()), blocks);
  double result = 0.0;
  copy_to_host(&result, out, 8);
  return result;
}

}  // namespace GPL_SIMT_NAMESPACE
}  // namespace gpuledger
