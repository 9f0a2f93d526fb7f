// CUDA LayerNorm (Ba et al. 2016) and RMSNorm (Zhang & Sennrich 2019) over the
// rows of (N, C): one block per row (launch_config.h, row_threads), statistics
// by block reductions in fp32, two passes for the variance (no E[x²] − E[x]²
// cancellation). The output is computed from the stored fp32 mean and rstd, so
// backward sees exactly the normalisation forward applied. Backward uses the
// CPU reference's row-wise closed forms (kernels/cpu/ops_norm.cpp):
//   LayerNorm: x̂ = (x − μ)·r, g = dout ⊙ w, dx = r·(g − mean(g) − x̂·mean(g ⊙ x̂))
//   RMSNorm:   x̂ = x·r,       dx = r·(g − x̂·mean(g ⊙ x̂))
// and dw += Σ_rows dout ⊙ x̂, dbias += Σ_rows dout through column_reduce.cuh.
#include "kernels/cuda/column_reduce.cuh"
#include "kernels/cuda/launch_config.h"
#include "kernels/cuda/simt_device.cuh"

namespace gpuledger {
inline namespace GPL_SIMT_NAMESPACE {
namespace {

using namespace simt;

// mean == nullptr: RMSNorm (no centring, no bias).
template <class T>
__global__ void norm_forward_kernel(T* out, float* mean, float* rstd, const T* x, const T* w, const T* bias, int64_t C,
                                    float eps, bool centre) {
  GPL_SHARED float scratch[32];
  const int64_t r = blockIdx.x;
  const T* xr = x + r * C;
  T* orow = out + r * C;
  const int64_t tid = threadIdx.x, nt = blockDim.x;
  float mu = 0.0f;
  if (centre) {
    float s = 0.0f;
    for (int64_t c = tid; c < C; c += nt) s += to_float(xr[c]);
    mu = block_reduce(s, scratch, SumOp{}) / static_cast<float>(C);
  }
  float ss = 0.0f;
  for (int64_t c = tid; c < C; c += nt) {
    const float d = to_float(xr[c]) - mu;
    ss += d * d;
  }
  const float var = block_reduce(ss, scratch, SumOp{}) / static_cast<float>(C);
  const float rs = 1.0f / sqrtf(var + eps);
  if (tid == 0) {
    if (centre && mean) mean[r] = mu;
    if (rstd) rstd[r] = rs;
  }
  for (int64_t c = tid; c < C; c += nt) {
    const float b = bias ? to_float(bias[c]) : 0.0f;
    orow[c] = from_float<T>((to_float(xr[c]) - mu) * rs * to_float(w[c]) + b);
  }
}

// dx of one row per block; mean == nullptr: RMSNorm.
template <class T>
__global__ void norm_backward_dx_kernel(T* dx, const T* dout, const T* x, const T* w, const float* mean,
                                        const float* rstd, int64_t C, bool accumulate) {
  GPL_SHARED float scratch[32];
  const int64_t r = blockIdx.x;
  const int64_t tid = threadIdx.x, nt = blockDim.x;
  const T* xr = x + r * C;
  const T* dr = dout + r * C;
  const float mu = mean ? mean[r] : 0.0f, rs = rstd[r];
  float sg = 0.0f, sgx = 0.0f;
  for (int64_t c = tid; c < C; c += nt) {
    const float xh = (to_float(xr[c]) - mu) * rs;
    const float g = to_float(dr[c]) * to_float(w[c]);
    sg += g;
    sgx += g * xh;
  }
  const float mg = mean ? block_reduce(sg, scratch, SumOp{}) / static_cast<float>(C) : 0.0f;
  const float mgx = block_reduce(sgx, scratch, SumOp{}) / static_cast<float>(C);
  T* dxr = dx + r * C;
  for (int64_t c = tid; c < C; c += nt) {
    const float xh = (to_float(xr[c]) - mu) * rs;
    const float g = to_float(dr[c]) * to_float(w[c]);
    const float v = (g - mg - xh * mgx) * rs;
    dxr[c] = from_float<T>(accumulate ? to_float(dxr[c]) + v : v);
  }
}

// Weight-gradient values at (r, c): (dout·x̂, dout); mean == nullptr: RMSNorm.
// first_is_bias: only dbias is wanted, so .x carries dout.
template <class T>
struct NormWeightValue {
  const T* dout;
  const T* x;
  const float* mean;
  const float* rstd;
  int64_t C;
  bool first_is_bias;
  GPL_DEVICE float2 operator()(int64_t r, int64_t c) const {
    const float d = to_float(dout[r * C + c]);
    if (first_is_bias) return make_float2(d, 0.0f);
    const float mu = mean ? mean[r] : 0.0f;
    return make_float2(d * ((to_float(x[r * C + c]) - mu) * rstd[r]), d);
  }
};

template <class T>
void weight_grads(Device& dev, cudaStream_t stream, void* dw, void* dbias, DType grad_t, const T* dout, const T* x,
                  const float* mean, const float* rstd, int64_t N, int64_t C) {
  if (dw == nullptr && dbias == nullptr) return;
  const bool only_bias = dw == nullptr;
  const NormWeightValue<T> f{dout, x, mean, rstd, C, only_bias};
  // The CPU reference adds to dw and dbias (accumulate), as every parameter gradient.
  column_sums(dev, stream, f, N, C, only_bias ? dbias : dw, only_bias ? nullptr : dbias, grad_t, true);
}

}  // namespace

void SimtDevice::layernorm_forward_impl(void* out, float* mean, float* rstd, const void* x, const void* w,
                                        const void* bias, DType t, int64_t N, int64_t C, float eps) {
  if (N <= 0 || C <= 0) return;
  dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    launch_kernel(norm_forward_kernel<T>, grid1d(N), dim3(cuda_launch::row_threads(C)), 0, stream(),
                  static_cast<T*>(out), mean, rstd, static_cast<const T*>(x), static_cast<const T*>(w),
                  static_cast<const T*>(bias), C, eps, true);
  });
}

void SimtDevice::layernorm_backward_impl(void* dx, void* dw, void* dbias, DType grad_t, const void* dout, const void* x,
                                         const void* w, const float* mean, const float* rstd, DType t, int64_t N,
                                         int64_t C, bool accumulate_dx) {
  if (N <= 0 || C <= 0) return;
  dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    if (dx)
      launch_kernel(norm_backward_dx_kernel<T>, grid1d(N), dim3(cuda_launch::row_threads(C)), 0, stream(),
                    static_cast<T*>(dx), static_cast<const T*>(dout), static_cast<const T*>(x),
                    static_cast<const T*>(w), mean, rstd, C, accumulate_dx);
    weight_grads(*this, stream(), dw, dbias, grad_t, static_cast<const T*>(dout), static_cast<const T*>(x), mean, rstd,
                 N, C);
  });
}

void SimtDevice::rmsnorm_forward_impl(void* out, float* rstd, const void* x, const void* w, DType t, int64_t N,
                                      int64_t C, float eps) {
  if (N <= 0 || C <= 0) return;
  dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    launch_kernel(norm_forward_kernel<T>, grid1d(N), dim3(cuda_launch::row_threads(C)), 0, stream(),
                  static_cast<T*>(out), static_cast<float*>(nullptr), rstd, static_cast<const T*>(x),
                  static_cast<const T*>(w), static_cast<const T*>(nullptr), C, eps, false);
  });
}

void SimtDevice::rmsnorm_backward_impl(void* dx, void* dw, DType grad_t, const void* dout, const void* x, const void* w,
                                       const float* rstd, DType t, int64_t N, int64_t C, bool accumulate_dx) {
  if (N <= 0 || C <= 0) return;
  dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    if (dx)
      launch_kernel(norm_backward_dx_kernel<T>, grid1d(N), dim3(cuda_launch::row_threads(C)), 0, stream(),
                    static_cast<T*>(dx), static_cast<const T*>(dout), static_cast<const T*>(x),
                    static_cast<const T*>(w), static_cast<const float*>(nullptr), rstd, C, accumulate_dx);
    weight_grads(*this, stream(), dw, nullptr, grad_t, static_cast<const T*>(dout), static_cast<const T*>(x),
                 static_cast<const float*>(nullptr), rstd, N, C);
  });
}

}  // namespace GPL_SIMT_NAMESPACE
}  // namespace gpuledger
