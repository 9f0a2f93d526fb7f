// CUDA optimizer ops: the update of each optimizer (AdamW, SGD, Adagrad, Lion)
// and Σx² for gradient-norm clipping. The update runs the CPU reference's fp32
// arithmetic element by element from the one definition both share
// (kernels/optimizer_rules.h), one kernel instantiation per rule:
//   g = grad·grad_scale; p, states = rule(p, g, states); weights = round(p)
// with AdamW's bias corrections formed in double on the host (OptimizerStep).
// Σx² accumulates in double in a fixed grid (launch_config.h, reduce_blocks)
// and adds the block partials in order: the same result on every run.
#include <cmath>

#include "kernels/cuda/launch_config.h"
#include "kernels/cuda/simt_device.cuh"
#include "kernels/optimizer_rules.h"

namespace gpuledger {
inline namespace GPL_SIMT_NAMESPACE {
namespace {

using namespace simt;

// param: the fp32 master (or the fp32 weights); rounded: the 16-bit weights to
// refresh from it, or null; state1/state2: the rule's states, or null.
template <OptimizerKind K, class W, class G>
__global__ void optimizer_update_kernel(float* param, W* rounded, const G* grads, float* state1, float* state2,
                                        int64_t n, OptimizerStep update) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const float g = to_float(grads[i]) * update.grad_scale;
    const float p =
        optimizer_element<K>(update, param[i], g, state1 ? state1 + i : nullptr, state2 ? state2 + i : nullptr);
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

void SimtDevice::optimizer_update_impl(float* master, void* weights, DType w_t, const void* grads, DType grad_t,
                                       float* state1, float* state2, int64_t n, const OptimizerStep& update) {
  float* param = master ? master : static_cast<float*>(weights);
  void* rounded = master ? weights : nullptr;
  const auto l = cuda_launch::elementwise(n);
  dispatch_optimizer(update.hyper.kind, [&]<OptimizerKind K>() {
    dispatch2(w_t, grad_t, [&](auto wt, auto gt) {
      using W = decltype(wt);
      using G = decltype(gt);
      launch_kernel(optimizer_update_kernel<K, W, G>, grid1d(l.blocks), dim3(l.threads), 0, stream(), param,
                    static_cast<W*>(rounded), static_cast<const G*>(grads), state1, state2, n, update);
    });
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
