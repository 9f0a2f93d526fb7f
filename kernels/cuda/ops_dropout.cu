// CUDA dropout (Srivastava et al. 2014, inverted: kept values scaled by
// 1/(1 − p)). Element i is kept iff philox_uniform(key, i) >= p
// (kernels/philox.h), the CPU reference's draw (kernels/cpu/ops_dropout.cpp),
// so both backends — and flash attention, and a recompute — produce the same
// mask bit for bit. A thread handles the four elements of one Philox block.
#include "kernels/cuda/launch_config.h"
#include "kernels/cuda/simt_device.cuh"
#include "kernels/philox.h"

namespace gpuledger {
inline namespace GPL_SIMT_NAMESPACE {
namespace {

using namespace simt;

// 1/(1 − p), or 0 when p == 1 (everything dropped: 0, not 0·inf).
inline float keep_scale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }

template <class E>
__global__ void dropout_forward_kernel(E* out, uint8_t* mask, const E* x, int64_t n, float p, float sc, uint64_t seed,
                                       uint64_t stream) {
  const int64_t groups = (n + 3) / 4;
  for (int64_t g = global_thread(); g < groups; g += grid_threads()) {
    const int64_t i0 = g * 4;
    if (p > 0.0f) {
      const Philox4x32Block blk = philox_block(seed, stream, static_cast<uint64_t>(g));
      for (int w = 0; w < 4 && i0 + w < n; ++w) {
        const bool keep = philox_word_to_uniform(blk.w[w]) >= p;
        out[i0 + w] = keep ? from_float<E>(to_float(x[i0 + w]) * sc) : from_float<E>(0.0f);
        if (mask) mask[i0 + w] = keep ? 1 : 0;
      }
    } else {
      for (int w = 0; w < 4 && i0 + w < n; ++w) {
        out[i0 + w] = from_float<E>(to_float(x[i0 + w]));  // p == 0: out = x exactly
        if (mask) mask[i0 + w] = 1;
      }
    }
  }
}

template <class D, class S>
__global__ void dropout_backward_kernel(D* dx, const S* dout, const uint8_t* mask, int64_t n, float p, float sc) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const float g = to_float(dout[i]);
    dx[i] = from_float<D>(p > 0.0f ? (mask[i] ? g * sc : 0.0f) : g);
  }
}

}  // namespace

void SimtDevice::dropout_forward_impl(void* out, uint8_t* mask, const void* x, DType t, int64_t n, float p,
                                      RngKey key) {
  if (n <= 0) return;
  const auto l = cuda_launch::elementwise(cuda_launch::ceil_div(n, 4));
  dispatch(t, [&](auto tag) {
    using E = decltype(tag);
    launch_kernel(dropout_forward_kernel<E>, grid1d(l.blocks), dim3(l.threads), 0, stream(), static_cast<E*>(out), mask,
                  static_cast<const E*>(x), n, p, keep_scale(p), key.seed, key.stream);
  });
}

void SimtDevice::dropout_backward_impl(void* dx, DType dx_t, const void* dout, DType dout_t, const uint8_t* mask,
                                       int64_t n, float p) {
  if (n <= 0) return;
  const auto l = cuda_launch::elementwise(n);
  dispatch2(dx_t, dout_t, [&](auto dt, auto st) {
    using D = decltype(dt);
    using S = decltype(st);
    launch_kernel(dropout_backward_kernel<D, S>, grid1d(l.blocks), dim3(l.threads), 0, stream(), static_cast<D*>(dx),
                  static_cast<const S*>(dout), mask, n, p, keep_scale(p));
  });
}

}  // namespace GPL_SIMT_NAMESPACE
}  // namespace gpuledger
